import LiveDispatchBench
import Testing

@Suite("Resident set series")
struct ResidentSetSeriesTests {
    private func series(_ values: [Double], every step: Double = 10) -> ResidentSetSeries {
        var series = ResidentSetSeries(warmUpSeconds: 30, tolerancePercent: 15)
        for (index, value) in values.enumerated() { series.add(.init(seconds: Double(index) * step, megabytes: value)) }
        return series
    }

    @Test func aFlatSeriesAfterAGrowingWarmUpIsStable() {
        let series = series([20, 60, 95, 100, 104, 98, 102, 100])
        #expect(series.steady.count == 5)
        #expect(series.steadyMean == 100.8)
        #expect(series.isStable)
    }

    @Test func growthBeyondTheToleranceAfterWarmUpIsNotStable() {
        let series = series([20, 60, 80, 90, 100, 110, 120, 130])
        #expect(!series.isStable)
        let deviation = series.deviationPercent
        #expect((deviation?.high ?? 0) > 15)
    }

    @Test func aDropBeyondTheToleranceIsNotStableEither() {
        #expect(!series([100, 100, 100, 100, 100, 100, 60]).isStable)
    }

    @Test func tooFewSamplesAfterWarmUpProveNothing() {
        #expect(!series([100, 100, 100, 100]).isStable)
        #expect(!series([]).isStable)
        #expect(series([]).steadyMean == nil)
    }

    @Test func samplesOfAProcessGoneAreIgnored() {
        var series = series([100, 100, 100, 100, 100])
        series.add(.init(seconds: 50, megabytes: .nan))
        #expect(series.samples.count == 5)
        #expect(series.isStable)
    }
}
