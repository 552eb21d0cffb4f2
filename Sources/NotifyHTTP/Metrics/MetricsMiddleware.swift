import HTTPTypes
import Hummingbird

/// Counts every response by its status, refusals of the checks behind it included (it goes first).
struct MetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let metrics: GatewayMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        do {
            let response = try await next(request, context)
            metrics.responded(response.status.code)
            return response
        } catch let error as any HTTPResponseError {
            metrics.responded(error.status.code)
            throw error
        } catch {
            metrics.responded(500)
            throw error
        }
    }
}
