public import NIOCore

extension ByteBuffer {
    /// Writes `request` as its frame (PROTOCOL.md, "Requests").
    /// - Returns: the number of bytes written.
    @discardableResult
    public mutating func writeRequest(_ request: Request) -> Int {
        var written = writeRequestID(request.id)
        switch request.command {
        case .publish(let topic, let payload, let options):
            written += writeStaticString("PUB ") + writeString(topic.name) + writeStaticString(" ")
            written += writeDecimal(UInt64(payload.readableBytes))
            if !options.retain { written += writeStaticString(" noretain") }
            if options.acknowledge { written += writeStaticString(" ack") }
            written += writeStaticString("\n") + writeImmutableBuffer(payload)
        case .subscribe(let pattern, let options):
            written += writeStaticString("SUB ") + writeString(pattern.text)
            if options.latestFirst { written += writeStaticString(" latest") }
            switch options.since {
            case .sequence(let sequence)?: written += writeStaticString(" since=") + writeDecimal(sequence)
            case .time(let time)?: written += writeStaticString(" since=") + writeString(time.rfc3339)
            case nil: break
            }
            if options.overflow != .dropOldest { written += writeStaticString(" overflow=") + writeString(options.overflow.rawValue) }
        case .unsubscribe(let pattern):
            written += writeStaticString("UNSUB ") + writeString(pattern.text)
        case .latest(let topic):
            written += writeStaticString("LATEST ") + writeString(topic.name)
        case .clear(let topic):
            written += writeStaticString("CLEAR ") + writeString(topic.name)
        case .history(let topic, let count):
            written += writeStaticString("HISTORY ") + writeString(topic.name)
            if let count { written += writeStaticString(" ") + writeDecimal(UInt64(count)) }
        case .topics(let pattern, let after):
            written += writeStaticString("TOPICS")
            if let pattern { written += writeStaticString(" ") + writeString(pattern.text) }
            if let after { written += writeStaticString(" after=") + writeString(after.name) }
        case .stats:
            written += writeStaticString("STATS")
        case .explain(let topic, let uid):
            written += writeStaticString("EXPLAIN ") + writeString(topic.name)
            if let uid { written += writeStaticString(" ") + writeDecimal(UInt64(uid)) }
        case .ping:
            written += writeStaticString("PING")
        case .setEcho(let echo):
            written += writeStaticString(echo ? "OPT echo" : "OPT noecho")
        case .setDeliveriesPaused(let paused):
            written += writeStaticString(paused ? "OPT pause" : "OPT resume")
        }
        return written + writeStaticString("\n")
    }

    /// Writes `#<id> ` when there is an id.
    @discardableResult
    @usableFromInline
    mutating func writeRequestID(_ id: UInt64?) -> Int {
        guard let id else { return 0 }
        return writeStaticString("#") + writeDecimal(id) + writeStaticString(" ")
    }
}
