/// The 64-bit FNV-1a hash of a text's UTF-8 bytes: stable across
/// processes and releases (unlike `Hasher`), for values that are stored.
/// Not collision resistant; use it where a collision costs little.
public enum FNV1a {
    public static func hash(_ text: String) -> UInt64 {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return hash
    }
}
