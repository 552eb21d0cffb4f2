import HTTPTypes
import Hummingbird
import NIOCore
import NIOWebSocket
import NotifyBus

/// A request the gateway answers with an error: its HTTP status and a sentence, sent as ntfy's error object
/// (`{"code": …, "http": …, "error": …}`).
struct GatewayError: Error, Equatable {
    var status: HTTPResponse.Status
    var sentence: String

    init(_ status: HTTPResponse.Status, _ sentence: String) {
        self.status = status
        self.sentence = sentence
    }

    /// The error for what the daemon or the client library refused or could not do, with the daemon's sentence.
    init(_ error: any Error) {
        guard let error = error as? NotifyClientError else {
            self.init(.internalServerError, "\(error)")
            return
        }
        switch error.kind {
        case .refused:
            self.init(GatewayError.status(for: error.refusal?.code), error.refusal?.message ?? error.message)
        case .invalidInput:
            self.init(.badRequest, error.message)
        case .notPermitted, .unreachable, .connectionClosed, .protocolViolation:
            self.init(.serviceUnavailable, "the daemon cannot be reached: \(error.message)")
        }
    }

    /// The status for a refusal of the daemon with `code`.
    static func status(for code: ErrorCode?) -> HTTPResponse.Status {
        switch code {
        case .invalidTopic?, .malformed?: .badRequest
        case .payloadTooLarge?: .contentTooLarge
        case .notPermitted?: .forbidden
        case .limitReached?: .tooManyRequests
        case .notFound?: .notFound
        case .storage?, .unavailable?: .serviceUnavailable
        default: .badGateway
        }
    }
}

extension GatewayError: HTTPResponseError {
    /// ntfy's error object: `{"code": <status × 100>, "http": <status>, "error": <sentence>}`.
    func response(from request: Request, context: some RequestContext) throws -> Response {
        var body = ByteBuffer()
        writeBody(into: &body)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }

    /// How a WebSocket already upgraded says this: a close with 1008 (a bound passed, 429) or 1011 (the rest), and
    /// the sentence, cut to fit a close frame.
    var webSocketClose: (code: WebSocketErrorCode, reason: String) {
        (status == .tooManyRequests ? .policyViolation : .unexpectedServerError, String(sentence.prefix(120)))
    }

    /// Appends ntfy's error object, and a line break.
    func writeBody(into body: inout ByteBuffer) {
        JSONWriter.object(into: &body) { json in
            json.field("code", UInt64(status.code) * 100)
            json.field("http", UInt64(status.code))
            json.field("error", sentence)
        }
        body.writeStaticString("\n")
    }
}
