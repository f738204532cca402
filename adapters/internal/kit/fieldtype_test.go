package kit

import (
	"encoding/json"
	"testing"
)

func TestFieldType(t *testing.T) {
	var v struct {
		TS    string `json:"timestamp"`
		Calls []struct {
			Status string `json:"status"`
		} `json:"toolCalls"`
		N int `json:"n"`
	}
	err := json.Unmarshal([]byte(`{"timestamp":5,"n":3}`), &v)
	if got, ok := FieldType(err); !ok || got != "timestamp: number" || v.N != 3 {
		t.Errorf("%q %v (n %d)", got, ok, v.N)
	}
	err = json.Unmarshal([]byte(`{"toolCalls":[{"status":true}]}`), &v)
	if got, ok := FieldType(err); !ok || got != "toolCalls.status: bool" {
		t.Errorf("%q %v", got, ok)
	}
	for _, in := range []string{`{"timestamp":`, `[1]`, `"x"`} {
		if got, ok := FieldType(json.Unmarshal([]byte(in), &v)); ok {
			t.Errorf("%s: %q", in, got)
		}
	}
	if _, ok := FieldType(nil); ok {
		t.Error("nil")
	}
}
