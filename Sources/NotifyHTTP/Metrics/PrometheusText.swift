/// Prometheus's text exposition format (version 0.0.4), written by hand: a few families of counters and gauges, each
/// with its `# HELP` and `# TYPE` lines, then its samples.
struct PrometheusText {
    enum Kind: String {
        case counter, gauge
    }

    private(set) var text = ""
    /// The families written: a name comes once, or a scraper refuses the whole page.
    private var families: Set<String> = []

    /// The content type a scraper is served.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    /// Starts the family `name` (letters, digits and `_` only: anything else becomes `_`); false, writing nothing,
    /// when a family of that name was written already (its samples must then not be written either).
    @discardableResult
    mutating func family(_ name: String, _ kind: Kind, help: String) -> Bool {
        let name = PrometheusText.metricName(name)
        guard families.insert(name).inserted else { return false }
        text += "# HELP \(name) \(PrometheusText.escapeHelp(help))\n# TYPE \(name) \(kind.rawValue)\n"
        return true
    }

    /// One sample of the family just started (`name` is the family's), with `labels` in their order.
    mutating func sample(_ name: String, labels: KeyValuePairs<String, String> = [:], _ value: UInt64) {
        text += PrometheusText.metricName(name)
        if !labels.isEmpty {
            text += "{" + labels.map { "\(PrometheusText.metricName($0.key))=\"\(PrometheusText.escapeLabel($0.value))\"" }.joined(separator: ",") + "}"
        }
        text += " \(value)\n"
    }

    /// A family with one sample; nothing when a family of that name was written already.
    mutating func single(_ name: String, _ kind: Kind, help: String, _ value: UInt64) {
        guard family(name, kind, help: help) else { return }
        sample(name, value)
    }

    /// `name` with what a metric name may not hold made `_` (a name starts with a letter or `_`).
    static func metricName(_ name: String) -> String {
        var out = String.UnicodeScalarView()
        for (index, scalar) in name.unicodeScalars.enumerated() {
            let isLetter = (scalar >= "a" && scalar <= "z") || (scalar >= "A" && scalar <= "Z") || scalar == "_"
            let isDigit = scalar >= "0" && scalar <= "9"
            out.append(isLetter || (isDigit && index > 0) ? scalar : "_")
        }
        return out.isEmpty ? "_" : String(out)
    }

    /// A HELP text: `\` and line breaks escaped.
    static func escapeHelp(_ text: String) -> String {
        escape(text, quotes: false)
    }

    /// A label value: `\`, `"` and line breaks escaped.
    static func escapeLabel(_ text: String) -> String {
        escape(text, quotes: true)
    }

    private static func escape(_ text: String, quotes: Bool) -> String {
        // By scalar: a "\r\n" is one Character, and its line break must be escaped too.
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out.append(contentsOf: "\\\\".unicodeScalars)
            case "\n": out.append(contentsOf: "\\n".unicodeScalars)
            case "\"" where quotes: out.append(contentsOf: "\\\"".unicodeScalars)
            default: out.append(scalar)
            }
        }
        return String(out)
    }
}
