package store

import (
	"bytes"
	"fmt"

	"github.com/reinhq/rein/session"
)

// CheckLine refuses an event whose line would not read back as one event:
// data with a newline (valid JSON may hold one between tokens; json.Marshal
// output never does) or a type with quotes, backslashes or control bytes.
// Writers call it before accepting a batch: acknowledging such an event
// would leave a session that Load refuses (and, in any backend, one that
// does not export to a session file).
func CheckLine(ev session.Event) error {
	if bytes.IndexByte(ev.Data, '\n') >= 0 {
		return fmt.Errorf("%w: seq %d: data holds a newline; encode it compactly", session.ErrCorrupt, ev.Seq)
	}
	for i := 0; i < len(ev.Type); i++ {
		if c := ev.Type[i]; c < 0x20 || c == '"' || c == '\\' || c == 0x7f {
			return fmt.Errorf("%w: seq %d: type %q is not a plain name", session.ErrCorrupt, ev.Seq, ev.Type)
		}
	}
	return nil
}
