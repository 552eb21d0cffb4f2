/// What a `/metrics` page says, read as a scraper reads Prometheus's text format (0.0.4), strictly: every line a
/// `# HELP`, a `# TYPE` or a sample; names as the format allows them; label values with only the escapes it knows;
/// each family's TYPE at most once and before its samples, and its samples together.
public struct PrometheusExposition: Sendable {
    /// One sample: a metric's name, its labels, its value.
    public struct Sample: Sendable, Equatable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    /// Why a page is not valid, and on which line (counted from 1).
    public struct Invalid: Error, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "line \(line): \(reason)" }
    }

    public private(set) var help: [String: String] = [:]
    public private(set) var types: [String: String] = [:]
    public private(set) var samples: [Sample] = []

    public init(parsing text: String) throws {
        guard text.hasSuffix("\n") else { throw Invalid(line: 0, reason: "the page does not end with a line break") }
        var finished: Set<String> = []
        var current: String?
        for (index, line) in text.dropLast().split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = index + 1
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") {
                let rest = line.dropFirst(7)
                let name = String(rest.prefix { $0 != " " })
                guard Self.isName(name), rest.count > name.count else { throw Invalid(line: number, reason: "no name and text: \(line)") }
                let value = String(rest.dropFirst(name.count + 1))
                if line.hasPrefix("# HELP ") {
                    guard help[name] == nil else { throw Invalid(line: number, reason: "a second HELP for \(name)") }
                    help[name] = try Self.unescape(value[...], quotes: false, line: number)
                } else {
                    guard types[name] == nil else { throw Invalid(line: number, reason: "a second TYPE for \(name)") }
                    guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(value) else {
                        throw Invalid(line: number, reason: "an unknown type \(value)")
                    }
                    guard !samples.contains(where: { $0.name == name }) else {
                        throw Invalid(line: number, reason: "the TYPE of \(name) after its samples")
                    }
                    types[name] = value
                }
                continue
            }
            guard !line.hasPrefix("#") else { continue }
            let sample = try Self.sample(line, number: number)
            if sample.name != current {
                guard !finished.contains(sample.name) else { throw Invalid(line: number, reason: "the samples of \(sample.name) are not together") }
                if let current { finished.insert(current) }
                current = sample.name
            }
            samples.append(sample)
        }
    }

    /// The value of the sample `name` with exactly `labels`.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        samples.first { $0.name == name && $0.labels == labels }?.value
    }

    private static func isName(_ name: String) -> Bool {
        func isLetter(_ scalar: Unicode.Scalar) -> Bool {
            ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || scalar == "_" || scalar == ":"
        }
        guard let first = name.unicodeScalars.first, isLetter(first) else { return false }
        return name.unicodeScalars.allSatisfy { isLetter($0) || ("0"..."9").contains($0) }
    }

    private static func sample(_ line: Substring, number: Int) throws -> Sample {
        var rest = line[...]
        let name = String(rest.prefix { $0 != "{" && $0 != " " })
        guard isName(name) else { throw Invalid(line: number, reason: "not a metric name: \(name)") }
        rest = rest.dropFirst(name.count)
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                let label = String(rest.prefix { $0 != "=" })
                guard isName(label), !label.hasPrefix("__") else { throw Invalid(line: number, reason: "not a label name: \(label)") }
                rest = rest.dropFirst(label.count)
                guard rest.hasPrefix("=\"") else { throw Invalid(line: number, reason: "no =\" after \(label)") }
                rest = rest.dropFirst(2)
                var raw = Substring()
                var escaped = false
                var end = rest.startIndex
                while end < rest.endIndex {
                    let character = rest[end]
                    if !escaped && character == "\"" { break }
                    escaped = !escaped && character == "\\"
                    end = rest.index(after: end)
                }
                guard end < rest.endIndex else { throw Invalid(line: number, reason: "an unterminated value of \(label)") }
                raw = rest[rest.startIndex..<end]
                guard labels[label] == nil else { throw Invalid(line: number, reason: "\(label) twice") }
                labels[label] = try unescape(raw, quotes: true, line: number)
                rest = rest[rest.index(after: end)...]
                if rest.first == "," { rest = rest.dropFirst() } else if rest.first != "}" {
                    throw Invalid(line: number, reason: "no , or } after the value of \(label)")
                }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " ", let value = Double(rest.dropFirst()) else {
            throw Invalid(line: number, reason: "no value after one space: \(line)")
        }
        return Sample(name: name, labels: labels, value: value)
    }

    private static func unescape(_ text: Substring, quotes: Bool, line: Int) throws -> String {
        var out = ""
        var escaped = false
        for character in text {
            if escaped {
                switch character {
                case "\\": out.append("\\")
                case "n": out.append("\n")
                case "\"" where quotes: out.append("\"")
                default: throw Invalid(line: line, reason: "an unknown escape \\\(character)")
                }
                escaped = false
            } else if character == "\\" {
                escaped = true
            } else {
                out.append(character)
            }
        }
        guard !escaped else { throw Invalid(line: line, reason: "a lone \\ at the end") }
        return out
    }
}
