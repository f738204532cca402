package session

// Record, Event and the types they hold are encoded by the AppendJSON
// methods of json_gen.go, which jsongen writes from their json tags: the
// store writes every record and event it commits with them, byte for byte
// as json.Marshal would (TestAppendJSONIsMarshal). After a change to one
// of those types, run go generate ./session; jsongen's TestGenerated fails
// while the file is not current.

//go:generate go run -tags jsongen github.com/sessiond/sessiond/internal/jsongen
