/// Resident-set samples of a process under steady load, and whether they
/// stay within a band around their mean once warmed up: the verdict of
/// `livedispatch-bench soak`.
public struct ResidentSetSeries: Sendable, Hashable {
    /// One sample: seconds since the load started, resident set in MB.
    public struct Sample: Sendable, Hashable {
        public var seconds: Double
        public var megabytes: Double
        public init(seconds: Double, megabytes: Double) {
            self.seconds = seconds
            self.megabytes = megabytes
        }
    }

    /// Samples before this many seconds are warm-up and not judged.
    public var warmUpSeconds: Double
    /// Allowed deviation from the mean after warm-up, in percent.
    public var tolerancePercent: Double
    public private(set) var samples: [Sample] = []

    public init(warmUpSeconds: Double, tolerancePercent: Double) {
        self.warmUpSeconds = warmUpSeconds
        self.tolerancePercent = tolerancePercent
    }

    /// Adds a sample; samples that are not finite numbers (a process gone) are ignored.
    public mutating func add(_ sample: Sample) {
        guard sample.seconds.isFinite, sample.megabytes.isFinite else { return }
        samples.append(sample)
    }

    /// The samples judged: those taken after the warm-up.
    public var steady: [Sample] { samples.filter { $0.seconds >= warmUpSeconds } }

    /// Mean resident set after warm-up (nil without samples).
    public var steadyMean: Double? {
        let steady = steady
        guard !steady.isEmpty else { return nil }
        return steady.reduce(0) { $0 + $1.megabytes } / Double(steady.count)
    }

    /// Lowest and highest deviation from the steady mean, in percent.
    public var deviationPercent: (low: Double, high: Double)? {
        guard let mean = steadyMean, mean > 0 else { return nil }
        let steady = steady.map(\.megabytes)
        guard let low = steady.min(), let high = steady.max() else { return nil }
        return ((low - mean) / mean * 100, (high - mean) / mean * 100)
    }

    /// Whether at least two samples were taken after warm-up and every one
    /// lies within the tolerance of their mean.
    public var isStable: Bool {
        guard steady.count >= 2, let deviation = deviationPercent else { return false }
        return -deviation.low <= tolerancePercent && deviation.high <= tolerancePercent
    }
}
