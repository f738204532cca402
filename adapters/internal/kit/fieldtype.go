package kit

import (
	"encoding/json"
	"errors"
)

// FieldType is the DriftFieldType value err names when it says a JSON
// field came with another type than the one decoded into
// ("timestamp: number"). encoding/json decodes the rest of the value all
// the same, so a reader notes the field, leaves it unused, and goes on
// with what was decoded. ok is false for any other error (the value is
// not JSON, or not an object where one is read).
func FieldType(err error) (value string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Field == "" {
		return "", false
	}
	return te.Field + ": " + te.Value, true
}
