import LiveDispatchBench
import Testing

@Suite("Idle figures")
struct IdleFiguresTests {
    @Test func aStatLineGivesUserPlusSystemTicksWhateverTheCommandName() {
        // Field 2 holds spaces and a parenthesis; utime (14) 250, stime (15) 50.
        let stat = "4242 (live dispatch) x) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 50 0 0 20 0 9 0 100 200000 3000 18446744073709551615\n"
        #expect(ProcessCPUTime(procStat: stat) == ProcessCPUTime(ticks: 300))
        #expect(ProcessCPUTime(procStat: "4242 (cut) S 1 2 3") == nil)
        #expect(ProcessCPUTime(procStat: "no parenthesis") == nil)
    }

    @Test func aShareOfACoreIsTicksOverTheInterval() throws {
        let earlier = ProcessCPUTime(ticks: 1_000)
        // 15 ticks of 1/100 s over 30 s: 0.15 s of CPU, 0.5 % of a core.
        let share = try #require(ProcessCPUTime(ticks: 1_015).percentOfACore(since: earlier, seconds: 30, ticksPerSecond: 100))
        #expect(abs(share - 0.5) < 1e-9)
        #expect(ProcessCPUTime(ticks: 900).percentOfACore(since: earlier, seconds: 30, ticksPerSecond: 100) == nil)
        #expect(ProcessCPUTime(ticks: 1_015).percentOfACore(since: earlier, seconds: 0, ticksPerSecond: 100) == nil)
    }

    static let before = """
        0      0      127.0.0.1:40000 127.0.0.1:9092 users:(("livedispatch",pid=101,fd=12))
        \t bbr wscale:10,10 rto:204 bytes_sent:900 segs_out:120 segs_in:118 data_segs_out:100 lastsnd:10
        0      0      127.0.0.1:40001 127.0.0.1:9092 users:(("livedispatch",pid=102,fd=12))
        \t bbr wscale:10,10 rto:204 data_segs_out:50 data_segs_in:49
        0      0      127.0.0.1:40002 127.0.0.1:9464 users:(("livedispatch",pid=101,fd=30))
        \t bbr data_segs_out:7
        0      0      127.0.0.1:40003 127.0.0.1:9092 users:(("python3",pid=555,fd=3))
        \t bbr data_segs_out:1000
        0      0      127.0.0.1:40004 127.0.0.1:9092 users:(("livedispatch",pid=102,fd=14))
        \t bbr data_segs_out:30
        """

    static let after = """
        0      0      127.0.0.1:40000 127.0.0.1:9092 users:(("livedispatch",pid=101,fd=12))
        \t bbr wscale:10,10 rto:204 bytes_sent:900 segs_out:180 segs_in:178 data_segs_out:160 lastsnd:10
        0      0      127.0.0.1:40001 127.0.0.1:9092 users:(("livedispatch",pid=102,fd=12))
        \t bbr wscale:10,10 rto:204 data_segs_out:55 data_segs_in:49
        0      0      127.0.0.1:40002 127.0.0.1:9464 users:(("livedispatch",pid=101,fd=30))
        \t bbr data_segs_out:70
        0      0      127.0.0.1:40003 127.0.0.1:9092 users:(("python3",pid=555,fd=3))
        \t bbr data_segs_out:5000
        0      0      127.0.0.1:40005 127.0.0.1:9092 users:(("livedispatch",pid=102,fd=15))
        \t bbr rto:204
        0      0      127.0.0.1:40006 127.0.0.1:9092 users:(("livedispatch",pid=101,fd=16))
        \t bbr data_segs_out:4
        """

    @Test func ssOutputGivesEachConnectionItsProcessAndSegments() {
        let reading = SocketSegments(ssOutput: Self.before)
        #expect(reading.connections.count == 5)
        #expect(reading.connections[0] == .init(local: "127.0.0.1:40000", peer: "127.0.0.1:9092", pid: 101, dataSegmentsOut: 100))
        #expect(reading.connections[3].pid == 555)
        #expect(SocketSegments(ssOutput: "").connections.isEmpty)
    }

    @Test func requestsCountTheWorkersSegmentsToTheBrokerOnly() {
        let sent = SocketSegments(ssOutput: Self.after).segmentsSent(
            since: SocketSegments(ssOutput: Self.before), pids: [101, 102], peerPorts: [9092])
        // 60 + 5 on the connections kept, 0 + 4 on those opened since; not
        // the admin port's 63, not another process's 4000, nothing for the
        // connection closed in between.
        #expect(sent == 69)
    }

    @Test func theLineNamesEveryFigure() {
        let figures = IdleFigures(workerPercents: [0.25, 0.3, nil, 2], brokerPercent: 1.54, brokerPID: 812, requestsPerSecond: 9.44)
        #expect(figures.line == "idle: 4 workers, worker CPU 0.2/0.3/?/2.0 % of a core, broker CPU 1.5 % (pid 812), requests to the broker 9.4/s")
        let unmeasured = IdleFigures(workerPercents: [0.1], brokerPercent: nil, brokerPID: nil, requestsPerSecond: 0)
        #expect(unmeasured.line == "idle: 1 worker, worker CPU 0.1 % of a core, broker CPU not measured (give --broker-pid), requests to the broker 0.0/s")
    }
}
