import Foundation
import HTTPTypes
import Hummingbird

/// With a token table, lets through only requests that carry a token of it, and publishes only with a read-write
/// one: 401 without a valid token, 403 with a read-only one. The token comes as `Authorization: Bearer TOKEN`, or,
/// where no header can be set (a browser's `EventSource`, a WebSocket), as ntfy's `?auth=`: that header's value
/// in URL-safe base 64.
struct TokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokens: TokenTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if let refusal = TokenMiddleware.refusal(tokens: tokens, authorization: request.headers[.authorization], auth: request.uri.queryParameters["auth"], reading: request.method == .get || request.method == .head) {
            throw refusal
        }
        return try await next(request, context)
    }

    /// Why `tokens` refuse a request with this `Authorization` header or `?auth=` parameter (the header first), that
    /// only reads or that publishes; nil when they let it through.
    static func refusal(tokens: TokenTable, authorization: String?, auth: Substring?, reading: Bool) -> GatewayError? {
        guard let field = authorization ?? auth.flatMap({ decode($0) }),
            field.hasPrefix("Bearer "),
            let permission = tokens.permission(of: field.dropFirst("Bearer ".count))
        else {
            return GatewayError(.unauthorized, "this gateway takes requests with a token only: send Authorization: Bearer TOKEN")
        }
        if !reading, permission != .readWrite {
            return GatewayError(.forbidden, "this token may read only; publishing takes a read-write token")
        }
        return nil
    }

    /// ntfy's `auth` parameter: an `Authorization` value in base 64 (URL-safe or not, padded or not).
    static func decode(_ parameter: Substring) -> String? {
        var text = parameter.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.count % 4 != 0 { text += "=" }
        guard text.utf8.count <= 1_024, let data = Data(base64Encoded: text) else { return nil }
        return String(data: data, encoding: .utf8)
    }
}
