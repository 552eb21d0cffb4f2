import HTTPTypes
import Hummingbird

/// Refuses, with 403, a request whose `Host` or `Origin` is not the gateway's own (see ``SameOriginPolicy``): before
/// the token check, so that a page cannot learn from the answers which tokens or topics exist.
struct SameOriginMiddleware<Context: GatewayRequestContext>: RouterMiddleware {
    let policy: SameOriginPolicy

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let origin = request.headers[SameOriginMiddleware.origin]
        if let refusal = policy.refusal(host: request.head.authority, origin: origin, local: context.localAddress) {
            throw GatewayError(.forbidden, refusal)
        }
        return try await next(request, context)
    }

    private static var origin: HTTPField.Name { HTTPField.Name("Origin")! }
}
