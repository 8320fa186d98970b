@_spi(Fuzzing)
extension APNsOutcome {
    /// Classifies a response as the client does (for the fuzz targets).
    public static func classify(status: Int, headers: [String: String], body: [UInt8]) -> APNsOutcome {
        APNsResponse(status: status, headers: headers, body: body).outcome(requestAPNsID: "fuzz")
    }
}
