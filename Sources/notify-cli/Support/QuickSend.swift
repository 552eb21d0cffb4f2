/// `notify send TOPIC [MESSAGE] [--no-retain] [--socket PATH]`, recognised without the argument parser.
///
/// Shell scripts call `notify send` in loops, and building the full command tree costs the argument parser about
/// 16 million instructions (measured with callgrind), several times what the send itself costs. Only this exact
/// form is taken here; anything else (`--help`, `--lines`, an unknown option, a missing argument, an argument
/// starting with `-`) returns nil and goes to the argument parser, which also reports every mistake. The publish
/// itself is `Send.publishOnce`, the same code the argument parser's path runs.
struct QuickSend {
    var socket: String?
    var topic: String
    var message: String?
    var retain = true

    init?(arguments: [String]) {
        var rest = arguments.dropFirst()[...]
        var socket: String?
        func takeSocket(_ argument: String) -> Bool? {
            if argument == "--socket" {
                guard socket == nil, let value = rest.popFirst() else { return nil }
                socket = value
                return true
            }
            if argument.hasPrefix("--socket=") {
                guard socket == nil else { return nil }
                socket = String(argument.dropFirst("--socket=".count))
                return true
            }
            return false
        }
        guard var argument = rest.popFirst() else { return nil }
        switch takeSocket(argument) {
        case nil: return nil
        case true?:
            guard let next = rest.popFirst() else { return nil }
            argument = next
        case false?: break
        }
        guard argument == "send" else { return nil }

        var positionals: [String] = []
        var retain = true
        while let argument = rest.popFirst() {
            if argument == "--no-retain" {
                guard retain else { return nil }
                retain = false
                continue
            }
            switch takeSocket(argument) {
            case nil: return nil
            case true?: continue
            case false?: break
            }
            if argument.hasPrefix("-") { return nil }
            positionals.append(argument)
        }
        guard positionals.count == 1 || positionals.count == 2 else { return nil }
        self.socket = socket
        self.topic = positionals[0]
        self.message = positionals.count == 2 ? positionals[1] : nil
        self.retain = retain
    }

    /// Publishes and returns the exit status.
    func run() -> Int32 {
        do {
            try Send.publishOnce(socket: socket, topic: topic, message: message, retain: retain)
            return ExitStatus.success.rawValue
        } catch {
            return report(error)
        }
    }
}
