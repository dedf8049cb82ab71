package steps

import "encoding/json"

func jsonRaw(v any) (json.RawMessage, error) { return json.Marshal(v) }

func fromRaw(b json.RawMessage, v any) error {
	if len(b) == 0 {
		return nil
	}
	return json.Unmarshal(b, v)
}
