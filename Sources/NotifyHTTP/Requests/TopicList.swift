import HTTPTypes
import Foundation
import NotifyBus

/// The topics and patterns a stream's path names: comma-separated, each percent-decoded (`*` and `>` may come
/// encoded), checked as the daemon checks them.
enum TopicList {
    /// The most a stream may name: each is a subscription of the daemon's, counted against the gateway user's limits.
    static let mostPatterns = 32

    static func patterns(_ segment: Substring) throws(GatewayError) -> [TopicPattern] {
        let parts = segment.split(separator: ",", omittingEmptySubsequences: false)
        guard parts.count <= mostPatterns else {
            throw GatewayError(.badRequest, "a stream names at most \(mostPatterns) topics or patterns; this one names \(parts.count)")
        }
        var patterns: [TopicPattern] = []
        for part in parts {
            guard let text = String(part).removingPercentEncoding else {
                throw GatewayError(.badRequest, "\(part.prefix(64)) is not percent-encoded correctly")
            }
            do {
                let pattern = try TopicPattern(text)
                if !patterns.contains(pattern) { patterns.append(pattern) }
            } catch {
                throw GatewayError(.badRequest, "\(error)")
            }
        }
        return patterns
    }

    /// One topic (a publish, a `latest`): a name, no pattern.
    static func topic(_ segment: Substring) throws(GatewayError) -> Topic {
        guard let text = String(segment).removingPercentEncoding else {
            throw GatewayError(.badRequest, "\(segment.prefix(64)) is not percent-encoded correctly")
        }
        do {
            return try Topic(text)
        } catch {
            throw GatewayError(.badRequest, "\(error)")
        }
    }
}
