import Kafka
import Testing

@Suite("Murmur2 partitioner")
struct Murmur2PartitionerTests {
    /// The vectors of Kafka's `UtilsTest.testMurmur2` (Java client).
    @Test(arguments: [
        ("21", Int32(-973_932_308)),
        ("foobar", -790_332_482),
        ("a-little-bit-long-string", -985_981_536),
        ("a-little-bit-longer-string", -1_486_304_829),
        ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58_897_971),
        ("abc", 479_470_107),
    ])
    func matchesJavaClientVectors(input: String, expected: Int32) {
        #expect(Murmur2Partitioner.murmur2(Array(input.utf8)) == expected)
    }

    @Test func partitionIsPositiveHashModuloCount() {
        // toPositive(-790332482) = 1357151166; 1357151166 % 50 = 16.
        #expect(Murmur2Partitioner.partition(forKey: "foobar", partitionCount: 50) == 16)
        #expect(Murmur2Partitioner.partition(forKey: "21", partitionCount: 1) == 0)
        for key in ["match-42", "courier-7", "", "é"] {
            let partition = Murmur2Partitioner.partition(forKey: key, partitionCount: 12)
            #expect((0..<12).contains(partition))
            #expect(partition == Murmur2Partitioner.partition(forKey: Array(key.utf8), partitionCount: 12))
        }
    }
}
