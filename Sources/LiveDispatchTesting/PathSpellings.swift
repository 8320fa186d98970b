/// Spellings of a request path that a check on the raw path's prefix
/// would miss, for the HTTP tests and `bench http-attack`: extra slashes,
/// dot segments (plain and percent-encoded), encoded slashes and
/// backslashes, other cases, NUL and malformed escapes, the absolute form.
public enum PathSpellings {
    /// The spellings of `path` (which starts with `/v1/`).
    public static func of(_ path: String) -> [String] {
        let tail = String(path.dropFirst())
        let segments = tail.split(separator: "/").map(String.init)
        let rest = segments.dropFirst().joined(separator: "/")
        var spellings: [String] = ["/" + path, "//" + tail, "///" + tail, path + "/", path + "//"]
        spellings += [path.replacingOccurrences(of: "/", with: "//"), "/./" + tail, "/%2e/" + tail, "/%2E/" + tail, "/x/../" + tail]
        spellings += ["/x/%2e%2e/" + tail, "/v1/./" + rest, path.uppercased(), "/V1/" + rest, path + "/.", path + "/.."]
        spellings += ["/%2f" + tail, "/%2F" + tail, "/v1%2f" + rest, "\\" + tail, "/v1\\" + rest, "/%76%31/" + rest]
        spellings += [path + "%00", path + "%", "/v1/%zz/" + rest, "http://localhost" + path]
        if segments.count > 2 { spellings.append("/v1/" + segments[1] + "//" + segments.dropFirst(2).joined(separator: "/")) }
        return spellings
    }

    /// A route's path template with plain values for its parameters.
    public static func concrete(_ template: String, activity: String, deadLetter: String) -> String {
        template
            .replacingOccurrences(of: "{activity_id}", with: activity)
            .replacingOccurrences(of: "{token}", with: String(repeating: "ab", count: 32))
            .replacingOccurrences(of: "{id}", with: deadLetter)
    }
}
