extension Duration {
    /// The duration in seconds, as a `Double`.
    public var seconds: Double {
        let (whole, attoseconds) = components
        return Double(whole) + Double(attoseconds) * 1e-18
    }

    /// The duration in whole nanoseconds, rounded toward zero, saturating
    /// at the bounds of `Int64`.
    public var nanoseconds: Int64 {
        let (whole, attoseconds) = components
        let (scaled, overflow) = whole.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return whole < 0 ? .min : .max }
        let (sum, sumOverflow) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        guard !sumOverflow else { return whole < 0 ? .min : .max }
        return sum
    }
}
