package api

// Session is encoded by the AppendJSON method of json_gen.go, which
// jsongen writes from its json tags: the daemon encodes its lists with
// it, byte for byte as json.Marshal would
// (TestSessionAppendJSONIsMarshal). After a change to Session, run go
// generate ./api; jsongen's TestGenerated fails while the file is not
// current.

//go:generate go run -tags jsongen github.com/sessiond/sessiond/internal/jsongen
