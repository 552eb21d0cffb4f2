import HTTPTypes
import Hummingbird

/// With a token table, lets through only requests that carry a token of it (`Authorization: Bearer TOKEN`), and
/// publishes only with a read-write one: 401 without a valid token, 403 with a read-only one.
struct TokenMiddleware<Context: RequestContext>: RouterMiddleware {
    let tokens: TokenTable

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let field = request.headers[.authorization], field.hasPrefix("Bearer "),
            let permission = tokens.permission(of: field.dropFirst("Bearer ".count))
        else {
            throw GatewayError(.unauthorized, "this gateway takes requests with a token only: send Authorization: Bearer TOKEN")
        }
        if request.method != .get, request.method != .head, permission != .readWrite {
            throw GatewayError(.forbidden, "this token may read only; publishing takes a read-write token")
        }
        return try await next(request, context)
    }
}
