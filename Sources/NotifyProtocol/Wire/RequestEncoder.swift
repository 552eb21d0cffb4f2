public import NIOCore

extension ByteBuffer {
    /// Writes `request` as its frame (PROTOCOL.md, "Requests").
    /// - Returns: the number of bytes written.
    @discardableResult
    public mutating func writeRequest(_ request: Request) -> Int {
        if case .importMessage(let message) = request.command {
            // The line of a delivery, after its verb and kind: written as one.
            return writeMessageFrame(
                .fleetImport(message.kind, replayed: message.replayed),
                requestID: request.id,
                topic: message.delivery.topic.name,
                sequence: message.delivery.sequence,
                time: message.delivery.time,
                publisher: message.delivery.publisher,
                payload: message.delivery.payload
            )
        }
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
        case .follow(let patterns):
            written += writeStaticString("FOLLOW")
            for pattern in patterns { written += writeStaticString(" ") + writeString(pattern.text) }
        case .importMessage:
            preconditionFailure("written above")
        case .announceMissed(let count):
            written += writeStaticString("MISSED ") + writeDecimal(count)
        case .fleetStats(let stats):
            var lines = ByteBuffer()
            for counter in stats.counters {
                lines.writeString(counter.name)
                lines.writeStaticString(" ")
                lines.writeDecimal(counter.value)
                lines.writeStaticString("\n")
            }
            written += writeStaticString("FLEETSTATS ") + writeDecimal(UInt64(lines.readableBytes)) + writeStaticString("\n")
            written += writeBuffer(&lines)
        }
        return written + writeStaticString("\n")
    }

    /// Writes `#<id> ` when there is an id.
    @discardableResult
    @usableFromInline
    package mutating func writeRequestID(_ id: UInt64?) -> Int {
        guard let id else { return 0 }
        return writeStaticString("#") + writeDecimal(id) + writeStaticString(" ")
    }
}

extension ByteBuffer {
    /// Writes a fire-and-forget `PUB` frame (no request id: the daemon's fast path) of each of `payloads` to `topic`,
    /// in one pass: the frames are measured first and copied into the space reserved for them, so a publish costs
    /// its copies, not a capacity and uniqueness check per field. The frames are those ``writeRequest(_:)`` writes.
    /// - Returns: the number of bytes written.
    @discardableResult
    package mutating func writePublishes(_ payloads: [ByteBuffer], to topic: Topic, retain: Bool) -> Int {
        writeEachPublish(payloads, to: topic, retain: retain)
    }

    /// The same, for one payload. Both forms are concrete: a generic one, called from the client's module, ran
    /// unspecialized, asking the runtime for `CollectionOfOne`'s metadata at each publish (7 % of a publish loop).
    @discardableResult
    package mutating func writePublishes(_ payload: CollectionOfOne<ByteBuffer>, to topic: Topic, retain: Bool) -> Int {
        writeEachPublish(payload, to: topic, retain: retain)
    }

    private mutating func writeEachPublish(_ payloads: some Collection<ByteBuffer>, to topic: Topic, retain: Bool) -> Int {
        var name = topic.name
        return name.withUTF8 { name in
            let verb: StaticString = "PUB "
            let end: StaticString = retain ? "\n" : " noretain\n"
            var total = 0
            for payload in payloads {
                let size = payload.readableBytes
                total += verb.utf8CodeUnitCount + name.count + 1 + size.decimalDigits + end.utf8CodeUnitCount + size + 1
            }
            return writeWithUnsafeMutableBytes(minimumWritableBytes: total) { out in
                guard let base = out.baseAddress else { return 0 }
                var at = base
                func copy(_ bytes: UnsafeRawBufferPointer) {
                    guard let start = bytes.baseAddress, bytes.count > 0 else { return }
                    at.copyMemory(from: start, byteCount: bytes.count)
                    at += bytes.count
                }
                let verbBytes = UnsafeRawBufferPointer(start: verb.utf8Start, count: verb.utf8CodeUnitCount)
                let endBytes = UnsafeRawBufferPointer(start: end.utf8Start, count: end.utf8CodeUnitCount)
                for payload in payloads {
                    copy(verbBytes)
                    copy(UnsafeRawBufferPointer(name))
                    at.storeBytes(of: UInt8(ascii: " "), as: UInt8.self)
                    at += 1
                    at += payload.readableBytes.writeDecimal(to: at)
                    copy(endBytes)
                    payload.withUnsafeReadableBytes { copy($0) }
                    at.storeBytes(of: UInt8(ascii: "\n"), as: UInt8.self)
                    at += 1
                }
                return at - base
            }
        }
    }
}

extension Int {
    /// The digits of a non-negative number in decimal.
    fileprivate var decimalDigits: Int {
        var digits = 1
        var rest = self / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        return digits
    }

    /// Writes a non-negative number in decimal at `start`; returns the number of digits.
    fileprivate func writeDecimal(to start: UnsafeMutableRawPointer) -> Int {
        let digits = decimalDigits
        var rest = self
        var index = digits
        repeat {
            index -= 1
            start.storeBytes(of: UInt8(ascii: "0") + UInt8(rest % 10), toByteOffset: index, as: UInt8.self)
            rest /= 10
        } while rest > 0
        return digits
    }
}
