import HTTPTypes
import Foundation
import Hummingbird
import NIOCore
import NotifyBus

/// Publishing over HTTP: `PUT` or `POST /<topic>` with the message as the body, or in ntfy's `X-Message` header (or
/// `Message`, `m`) or `?message=` (`?m=`), and `POST /` with ntfy's JSON form (`{"topic": …, "message": …}`).
/// Retained, as `notify send` does, unless `?retain=no`, `X-Retain: no`, or ntfy's `X-Cache: no` (or `Cache: no`)
/// say otherwise. Each publish is acknowledged by the daemon before the reply: the reply is the message as the daemon
/// stamped it, and a refusal is a 4xx with the daemon's sentence. ntfy's fields that a notifyd message cannot carry
/// (title, tags, click, …) are refused (see ``NtfyForm``).
extension HTTPGateway {
    func publish(_ request: Request, topic segment: Substring, client address: String) async throws -> Response {
        let topic = try TopicList.topic(segment)
        try NtfyForm.refuseUnkept(in: request)
        let given = try NtfyForm.value(of: NtfyForm.message, in: request)
        let client = try await daemon()
        let limit = client.greeting.limits.maxPayload
        let body = try await HTTPGateway.collect(request, upTo: limit, what: "the message")
        var payload = body
        if let (spelling, text) = given {
            // ntfy would take the body as an attachment then: there is no such thing here.
            guard body.readableBytes == 0 else {
                throw GatewayError(.badRequest, "the message came both in \(spelling) and in the body; send it once")
            }
            payload = ByteBuffer(string: text)
            guard payload.readableBytes <= limit else { throw HTTPGateway.tooLarge("the message", limit: limit) }
        }
        return try await publish(payload, to: topic, retain: HTTPGateway.retains(request), on: client, for: address)
    }

    func publishJSON(_ request: Request, client address: String) async throws -> Response {
        // A page of another site can send a form or text/plain without asking first, never application/json.
        guard HTTPGateway.isJSON(request.headers[.contentType]) else {
            throw GatewayError(
                .unsupportedMediaType,
                "POST / takes ntfy's JSON form with Content-Type: application/json (curl -H 'Content-Type: application/json' -d '{\"topic\":…}'); a message alone goes to POST /<topic>"
            )
        }
        // ntfy takes its headers with the JSON form too: one that cannot be carried is refused here as well.
        try NtfyForm.refuseUnkept(in: request)
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
        try NtfyForm.refuseUnkept(in: object)
        let message = object["message"] ?? ""
        guard let text = message as? String else {
            throw GatewayError(.badRequest, "the JSON message's \"message\" is not a string")
        }
        let payload = ByteBuffer(string: text)
        guard payload.readableBytes <= limit else { throw HTTPGateway.tooLarge("the message", limit: limit) }
        return try await publish(payload, to: topic, retain: HTTPGateway.retains(request), on: client, for: address)
    }

    /// Publishes `payload` for a client of range `address`, a retained one within its share (see ``RetainedShares``).
    private func publish(_ payload: ByteBuffer, to topic: Topic, retain: Bool, on client: NotifyClient, for address: String) async throws -> Response {
        let previous = retain ? try await takeRetainedShare(topic, bytes: payload.readableBytes, by: address, on: client) : nil
        // Read before the publish: the daemon stamps it no earlier, so an id made of it, passed back as `since`,
        // may repeat the message but never skips one (used only where the daemon's own stamp cannot be read back).
        let before = PublishTime.now()
        let sequence: UInt64
        do {
            sequence = try await client.publishAcknowledged(payload, to: topic, retain: retain)
        } catch {
            if retain { retainedShares.restore(topic, previous) }
            throw GatewayError(error)
        }
        if retain { retainedShares.settle(topic, of: address, sequence: sequence) }
        let stamped = await HTTPGateway.stamped(sequence, of: topic, retained: retain, on: client)
        let delivery = stamped ?? Delivery(
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

    /// Counts a retained publish against `address`'s share; at the share, first forgets the topics whose buffered
    /// message the daemon no longer holds as the range published it (cleared, forgotten, replaced), then tries again.
    private func takeRetainedShare(_ topic: Topic, bytes: Int, by address: String, on client: NotifyClient) async throws -> (client: String, bytes: Int)? {
        do {
            return try retainedShares.take(topic, bytes: bytes, by: address)
        } catch {
            for (name, sequence) in retainedShares.candidates(of: address) {
                guard let held = try? Topic(name) else { continue }
                let latest: Delivery?
                do {
                    latest = try await client.latest(held)
                } catch {
                    continue  // a topic the gateway may not read stays counted
                }
                if latest?.sequence != sequence { retainedShares.forget(name, of: address, sequence: sequence) }
            }
            return try retainedShares.take(topic, bytes: bytes, by: address)
        }
    }

    /// The most messages published after one that the gateway looks through to read that one back.
    static let stampLookback = 64

    /// Message `sequence` of `topic` as the daemon recorded it (its time, its publisher's uid, pid and unit), read
    /// back from the topic's history, or, for a retained one, from its buffered message; nil when neither holds it
    /// (history off and not retained, replaced at once, or too many published since) or the gateway may not read
    /// the topic.
    static func stamped(_ sequence: UInt64, of topic: Topic, retained: Bool, on client: NotifyClient) async -> Delivery? {
        if retained, let latest = try? await client.latest(topic), latest.sequence == sequence { return latest }
        guard let newest = try? await client.history(of: topic, count: 1).last else { return nil }
        if newest.sequence == sequence { return newest }
        guard newest.sequence > sequence, newest.sequence - sequence < UInt64(stampLookback) else { return nil }
        let recent = try? await client.history(of: topic, count: Int(newest.sequence - sequence) + 1)
        return recent?.first { $0.sequence == sequence }
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
