import NotifyProtocol

/// CRC-32 (IEEE 802.3, as in zlib and PNG), to tell a state record that was written whole from one that was torn
/// or damaged.
///
/// Computed eight bytes at a time ("slicing-by-8"): every buffered message is checksummed as it is logged, and a
/// byte at a time took a third of a publish's time when each message went to a topic of its own.
enum CRC32 {
    /// `tables[k][b]`: the CRC of byte `b` followed by `k` zero bytes.
    private static let tables: [[UInt32]] = {
        var tables = [[UInt32]](repeating: [UInt32](repeating: 0, count: 256), count: 8)
        for index in 0..<256 {
            var value = UInt32(index)
            for _ in 0..<8 { value = value & 1 == 1 ? 0xEDB8_8320 ^ (value >> 1) : value >> 1 }
            tables[0][index] = value
        }
        for index in 0..<256 {
            for slice in 1..<8 {
                let previous = tables[slice - 1][index]
                tables[slice][index] = tables[0][Int(previous & 0xFF)] ^ (previous >> 8)
            }
        }
        return tables
    }()

    /// The checksum of `bytes`, continuing from `crc` (0 to start).
    static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
        var value = ~crc
        guard let base = bytes.baseAddress else { return crc }
        tables.withUnsafeBufferPointer { tables in
            let t0 = tables[0], t1 = tables[1], t2 = tables[2], t3 = tables[3]
            let t4 = tables[4], t5 = tables[5], t6 = tables[6], t7 = tables[7]
            var offset = 0
            let count = bytes.count
            while count - offset >= 8 {
                let low = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) ^ value
                let high = UInt32(littleEndian: base.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self))
                value = t7[Int(low & 0xFF)] ^ t6[Int((low >> 8) & 0xFF)] ^ t5[Int((low >> 16) & 0xFF)] ^ t4[Int(low >> 24)]
                    ^ t3[Int(high & 0xFF)] ^ t2[Int((high >> 8) & 0xFF)] ^ t1[Int((high >> 16) & 0xFF)] ^ t0[Int(high >> 24)]
                offset += 8
            }
            while offset < count {
                value = t0[Int((value ^ UInt32(base.load(fromByteOffset: offset, as: UInt8.self))) & 0xFF)] ^ (value >> 8)
                offset += 1
            }
        }
        return ~value
    }
}
