import HTTPTypes
import Foundation
import Hummingbird
import NIOCore
import NotifyBus

/// Publishing over HTTP: `PUT` or `POST /<topic>` with the message as the body, and `POST /` with ntfy's JSON form
/// (`{"topic": …, "message": …}`). Retained, as `notify send` does, unless `?retain=no`, `X-Retain: no`, or ntfy's
/// `X-Cache: no` (or `Cache: no`) say otherwise. Each publish is acknowledged by the daemon before the reply: the
/// reply is the message as a stream would send it, and a refusal is a 4xx with the daemon's sentence.
///
/// ntfy's other headers and fields (title, priority, tags, click, attach, …) are accepted and not kept: a message
/// of notifyd is its payload alone.
extension HTTPGateway {
    func publish(_ request: Request, topic segment: Substring) async throws -> Response {
        let topic = try TopicList.topic(segment)
        let client = try await daemon()
        let body = try await HTTPGateway.collect(request, upTo: client.greeting.limits.maxPayload, what: "the message")
        return try await publish(body, to: topic, retain: HTTPGateway.retains(request), on: client)
    }

    func publishJSON(_ request: Request) async throws -> Response {
        // A page of another site can send a form or text/plain without asking first, never application/json.
        guard HTTPGateway.isJSON(request.headers[.contentType]) else {
            throw GatewayError(
                .unsupportedMediaType,
                "POST / takes ntfy's JSON form with Content-Type: application/json (curl -H 'Content-Type: application/json' -d '{\"topic\":…}'); a message alone goes to POST /<topic>"
            )
        }
        let client = try await daemon()
        let limit = client.greeting.limits.maxPayload
        // Room for a message of the daemon's largest size written with JSON's escapes, and the other fields.
        let body = try await HTTPGateway.collect(request, upTo: limit * 6 + 65_536, what: "the JSON message")
        guard let object = try? JSONSerialization.jsonObject(with: Data(body.readableBytesView)) as? [String: Any] else {
            throw GatewayError(.badRequest, "the body is not a JSON object; send {\"topic\": \"…\", \"message\": \"…\"}, or the message alone to /<topic>")
        }
        guard let name = object["topic"] as? String else {
            throw GatewayError(.badRequest, "the JSON message has no \"topic\" (a string)")
        }
        let topic: Topic
        do {
            topic = try Topic(name)
        } catch {
            throw GatewayError(.badRequest, "\(error)")
        }
        let payload = ByteBuffer(string: object["message"] as? String ?? "")
        guard payload.readableBytes <= limit else { throw HTTPGateway.tooLarge("the message", limit: limit) }
        return try await publish(payload, to: topic, retain: HTTPGateway.retains(request), on: client)
    }

    private func publish(_ payload: ByteBuffer, to topic: Topic, retain: Bool, on client: NotifyClient) async throws -> Response {
        // Read before the publish: the daemon stamps it no earlier, so an id made of it, passed back as `since`,
        // may repeat the message but never skips one.
        let before = PublishTime.now()
        let sequence: UInt64
        do {
            sequence = try await client.publishAcknowledged(payload, to: topic, retain: retain)
        } catch {
            throw GatewayError(error)
        }
        let delivery = Delivery(
            topic: topic,
            sequence: sequence,
            time: before,
            publisher: Publisher(uid: getuid(), pid: getpid()),
            payload: payload
        )
        var body = ByteBuffer()
        GatewayEvent.message(delivery).writeJSON(into: &body)
        body.writeStaticString("\n")
        return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }

    /// Whether a `Content-Type` is `application/json` (with parameters or not).
    static func isJSON(_ contentType: String?) -> Bool {
        guard let contentType else { return false }
        let mediaType = contentType.split(separator: ";", maxSplits: 1).first ?? ""
        return mediaType.trimmingCharacters(in: .whitespaces).lowercased() == "application/json"
    }

    /// Whether a publish is retained: yes unless the query or a header says no.
    static func retains(_ request: Request) -> Bool {
        let no: Set<Substring> = ["no", "false", "0", "off"]
        if let retain = request.uri.queryParameters["retain"], no.contains(retain.lowercased()[...]) { return false }
        for name in ["X-Retain", "X-Cache", "Cache"] {
            if let field = HTTPField.Name(name), let value = request.headers[field], no.contains(value.lowercased()[...]) { return false }
        }
        return true
    }

    /// The request's body, refused with 413 past `limit` bytes (by its `Content-Length` before any is read).
    static func collect(_ request: Request, upTo limit: Int, what: String) async throws -> ByteBuffer {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
            throw tooLarge(what, limit: limit)
        }
        do {
            return try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw tooLarge(what, limit: limit)
        }
    }

    static func tooLarge(_ what: String, limit: Int) -> GatewayError {
        GatewayError(.contentTooLarge, "\(what) is larger than the daemon's max_payload of \(limit) bytes")
    }
}
