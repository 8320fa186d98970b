/// The partitioner of Kafka's Java client (`Utils.murmur2`, then
/// `toPositive(hash) % partitions`), which librdkafka calls `murmur2_random`
/// for records with a key. The worker uses it to put every record of one
/// activity in the same partition number across co-partitioned topics.
public enum Murmur2Partitioner {
    /// The Java client's `Utils.murmur2` of `key`, as a signed 32-bit value.
    public static func murmur2(_ key: some Collection<UInt8>) -> Int32 {
        let seed: UInt32 = 0x9747_b28c
        let m: UInt32 = 0x5bd1_e995
        let r: UInt32 = 24
        let bytes = Array(key)
        let length = bytes.count
        var h: UInt32 = seed ^ UInt32(truncatingIfNeeded: length)
        let blocks = length / 4
        for block in 0..<blocks {
            let i = block * 4
            var k = UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
            k &*= m
            k ^= k >> r
            k &*= m
            h &*= m
            h ^= k
        }
        let tail = blocks * 4
        switch length % 4 {
        case 3:
            h ^= UInt32(bytes[tail + 2]) << 16
            h ^= UInt32(bytes[tail + 1]) << 8
            h ^= UInt32(bytes[tail])
            h &*= m
        case 2:
            h ^= UInt32(bytes[tail + 1]) << 8
            h ^= UInt32(bytes[tail])
            h &*= m
        case 1:
            h ^= UInt32(bytes[tail])
            h &*= m
        default:
            break
        }
        h ^= h >> 13
        h &*= m
        h ^= h >> 15
        return Int32(bitPattern: h)
    }

    /// The partition the Java client (and librdkafka's `murmur2_random`)
    /// chooses for `key` among `partitionCount` partitions.
    /// `partitionCount` must be at least 1; 0 or less yields partition 0.
    public static func partition(forKey key: some Collection<UInt8>, partitionCount: Int) -> Int32 {
        guard partitionCount > 0 else { return 0 }
        let positive = UInt32(bitPattern: murmur2(key)) & 0x7fff_ffff
        return Int32(positive % UInt32(partitionCount))
    }

    /// The partition for a UTF-8 string key, such as an activity id.
    public static func partition(forKey key: String, partitionCount: Int) -> Int32 {
        partition(forKey: key.utf8, partitionCount: partitionCount)
    }
}
