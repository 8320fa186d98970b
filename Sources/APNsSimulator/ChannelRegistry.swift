import LiveDispatchCore

/// The broadcast channels of the simulated app in its one environment, in
/// order of creation, with at most `limit` at once (APNs: 10,000 per app
/// and environment). A value; the simulator keeps it under a lock.
public struct ChannelRegistry: Sendable, Hashable {
    /// Channels APNs lets an app keep per environment.
    public static let appleLimit = 10_000

    public let limit: Int
    private(set) var order: [String] = []
    private(set) var policies: [String: ChannelStoragePolicy] = [:]

    public init(limit: Int = ChannelRegistry.appleLimit) { self.limit = max(limit, 0) }

    /// Channel ids in order of creation.
    public var channelIDs: [String] { order }

    public func policy(of channelID: String) -> ChannelStoragePolicy? { policies[channelID] }

    /// Adds a channel; false when the app already has `limit`.
    mutating func create(_ channelID: String, policy: ChannelStoragePolicy) -> Bool {
        guard order.count < limit, policies[channelID] == nil else { return false }
        order.append(channelID)
        policies[channelID] = policy
        return true
    }

    /// Removes a channel; false when there was none.
    mutating func delete(_ channelID: String) -> Bool {
        guard policies.removeValue(forKey: channelID) != nil else { return false }
        order.removeAll { $0 == channelID }
        return true
    }

    /// A new channel id as APNs writes them: 16 random bytes in base64.
    static func newChannelID(using random: inout SplitMix64) -> String {
        var bytes: [UInt8] = []
        for _ in 0..<2 {
            let word = random.next()
            for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return base64(bytes)
    }

    /// Whether `text` reads as a channel id: base64 of 1 to 64 bytes.
    static func isChannelID(_ text: String) -> Bool {
        let utf8 = Array(text.utf8)
        guard (4...88).contains(utf8.count), utf8.count % 4 == 0 else { return false }
        let padding = utf8.reversed().prefix { $0 == UInt8(ascii: "=") }.count
        guard padding <= 2 else { return false }
        return utf8.dropLast(padding).allSatisfy { byte in
            (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "+")
                || byte == UInt8(ascii: "/")
        }
    }

    private static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var output: [UInt8] = []
        var index = 0
        while index < bytes.count {
            let chunk = bytes[index..<min(index + 3, bytes.count)]
            var word: UInt32 = 0
            for (offset, byte) in chunk.enumerated() { word |= UInt32(byte) << UInt32(16 - 8 * offset) }
            for position in 0..<4 {
                if position <= chunk.count {
                    output.append(alphabet[Int((word >> UInt32(18 - 6 * position)) & 0x3F)])
                } else {
                    output.append(UInt8(ascii: "="))
                }
            }
            index += 3
        }
        return String(decoding: output, as: UTF8.self)
    }
}
