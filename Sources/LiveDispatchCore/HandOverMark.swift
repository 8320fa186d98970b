/// What the two owners of a moving partition tell each other: the old owner
/// that keeps pushing it after its revocation (``PartitionOwnership``'s
/// lingering phase), and the new owner that must not push before the old
/// one has let go.
///
/// The mark is kept where both find it without a topic of its own: as the
/// committed offset of the partition's `commands` number under the
/// dispatcher's `<group_id>.copartitions` group, a group no member joins
/// and whose own offsets are those of `tokens` and `starts` only. An offset
/// carries one number, so the mark is encoded in it:
///
/// - none, 0 or anything negative: **released** (nobody lingers);
/// - even: **lingering**, until the old owner's linger deadline (twice its
///   Unix time in milliseconds);
/// - odd: **claimed** by the new owner, the old owner's deadline kept.
///
/// The deadline travels with the mark so the new owner knows how long the
/// old one may push at most, even when the old one died mid-linger or can
/// no longer write.
public enum HandOverMark: Sendable, Hashable {
    case released
    case lingering(until: UnixTime)
    case claimed(until: UnixTime)

    /// The mark an offset carries; nil (no committed offset) is released.
    public init(offset: Int64?) {
        guard let offset, offset > 0 else {
            self = .released
            return
        }
        let until = UnixTime(seconds: Double(offset / 2) / 1000)
        self = offset % 2 == 0 ? .lingering(until: until) : .claimed(until: until)
    }

    /// The offset that carries this mark.
    public var offset: Int64 {
        switch self {
        case .released: 0
        case .lingering(let until): Self.milliseconds(until) * 2
        case .claimed(let until): Self.milliseconds(until) * 2 + 1
        }
    }

    /// The old owner's deadline; nil when released.
    public var until: UnixTime? {
        switch self {
        case .released: nil
        case .lingering(let until), .claimed(let until): until
        }
    }

    /// Milliseconds since 1970, at least 1 so a lingering mark is never
    /// read as released, and small enough that twice it plus one fits.
    private static func milliseconds(_ time: UnixTime) -> Int64 {
        let upper = UnixTime.acceptedRange.upperBound
        let seconds = time.seconds.isNaN ? upper : min(max(time.seconds, 0.001), upper)
        return Int64((seconds * 1000).rounded())
    }
}
