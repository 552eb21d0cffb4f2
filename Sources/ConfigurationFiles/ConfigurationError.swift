/// A configuration file that cannot be used, and why (with the line, when one is to blame).
package struct ConfigurationError: Error, CustomStringConvertible {
    package let path: String
    package var line: Int?
    package let problem: String

    package init(path: String, line: Int? = nil, problem: String) {
        self.path = path
        self.line = line
        self.problem = problem
    }

    package var description: String {
        if let line { return "configuration \(path), line \(line): \(problem)" }
        return "configuration \(path): \(problem)"
    }
}

