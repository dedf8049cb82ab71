package brokers

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/kremedy/kremedy/internal/par"
	"github.com/kremedy/kremedy/internal/shell"
	"github.com/kremedy/kremedy/steps/ports"
	"github.com/kremedy/kremedy/steps/segments"
)

// listFunc lists log dirs: one line per entry with the dir's index, the
// kind (d, f, x for a missing dir, r for one the user cannot enter), the name, and for directories the
// topic id from partition.metadata; and one "a" line per dir saying
// whether the user the command runs as may move directories out of it
// into the quarantine beside it (ok, or which of dir, parent, quarantine
// it may not write). Shell builtins only: a log dir holds
// thousands of partition directories, and a fork or two per directory
// (sed, head) cost ~0.3 s per listing on the 3-broker lab.
const listFunc = `kremedy_list() {
  ( cd -- "$2" 2>/dev/null || { if [ -e "$2" ]; then k=r; else k=x; fi; printf '%s\t%s\t\t\n' "$1" "$k"; exit 0; }
    if ! { [ -w . ] && [ -x . ]; }; then a=dir
    elif ! { [ -w .. ] && [ -x .. ]; }; then a=parent
    elif [ -e ../kremedy-quarantine ] && ! { [ -w ../kremedy-quarantine ] && [ -x ../kremedy-quarantine ]; }; then a=quarantine
    else a=ok; fi
    printf '%s\ta\t%s\t\n' "$1" "$a"
    for e in * .[!.]* ..?*; do
      [ -e "$e" ] || [ -L "$e" ] || continue
      if [ -d "$e" ]; then
        id=
        if [ -f "$e/partition.metadata" ] && [ -r "$e/partition.metadata" ]; then
          while IFS= read -r l || [ -n "$l" ]; do
            case $l in topic_id:*) id=${l#topic_id:}; id=${id#"${id%%[! ]*}"}; break ;; esac
          done < "$e/partition.metadata"
        fi
        printf '%s\td\t%s\t%s\n' "$1" "$e" "$id"
      else
        printf '%s\tf\t%s\t\n' "$1" "$e"
      fi
    done )
}
`

// ListScript is the command that lists dirs on one host (see List).
func ListScript(dirs []string) string {
	var script strings.Builder
	script.WriteString(listFunc)
	for i, d := range dirs {
		fmt.Fprintf(&script, "kremedy_list %d %s\n", i, shell.Quote(d))
	}
	return shell.Script(script.String())
}

// Listing is every broker host's log dirs as listed over SSH.
type Listing struct {
	// Entries maps broker → log dir → its entries.
	Entries map[int32]map[string][]segments.Entry
	// Errs are the hosts that could not be listed; a missing log dir is an
	// error wrapping ports.ErrRefused.
	Errs map[int32]error
	// Unexpected are lines a host printed that are not listing lines.
	Unexpected map[int32][]string
	// Unwritable maps broker → the log dirs out of which the listing's
	// user cannot move a directory into the quarantine, each with what
	// it may not write ("dir", "parent" or "quarantine").
	Unwritable map[int32]map[string]string
}

// Err joins the hosts' errors, in broker order.
func (l Listing) Err(t ports.Target) error {
	var all []error
	for _, id := range HostIDs(t) {
		if err := l.Errs[id]; err != nil {
			all = append(all, err)
		}
	}
	return errors.Join(all...)
}

// List lists dirs (broker → its log dirs) on every broker host of t, one
// SSH command per host, hosts in parallel.
func List(ctx context.Context, h ports.Hosts, t ports.Target, dirs map[int32][]string) Listing {
	type res struct {
		l    map[string][]segments.Entry
		bad  []string
		unwr map[string]string
		err  error
	}
	ids := HostIDs(t)
	got := par.Each(ids, func(id int32) res {
		l, bad, unwr, err := listHost(ctx, h, id, dirs[id])
		return res{l, bad, unwr, err}
	})
	out := Listing{Entries: map[int32]map[string][]segments.Entry{}, Errs: map[int32]error{}, Unexpected: map[int32][]string{},
		Unwritable: map[int32]map[string]string{}}
	for i, id := range ids {
		out.Entries[id] = got[i].l
		if len(got[i].unwr) > 0 {
			out.Unwritable[id] = got[i].unwr
		}
		if len(got[i].bad) > 0 {
			out.Unexpected[id] = got[i].bad
		}
		if err := got[i].err; err != nil {
			host, _ := t.Host(id)
			if !errors.Is(err, ports.ErrRefused) {
				err = fmt.Errorf("broker %d's host %s: %w", id, host.Host, err)
			}
			out.Errs[id] = err
		}
	}
	return out
}

func listHost(ctx context.Context, h ports.Hosts, broker int32, dirs []string) (map[string][]segments.Entry, []string, map[string]string, error) {
	out := map[string][]segments.Entry{}
	unwr := map[string]string{}
	var missing, unreadable, bad []string
	err := h.Run(ctx, broker, ListScript(dirs), func(l ports.Line) {
		f := strings.SplitN(l.Text, "\t", 4)
		var i int
		if l.Stderr || len(f) != 4 || func() bool { _, err := fmt.Sscanf(f[0], "%d", &i); return err != nil }() || i < 0 || i >= len(dirs) {
			bad = append(bad, l.Text)
			return
		}
		switch f[1] {
		case "x":
			missing = append(missing, dirs[i])
		case "r":
			unreadable = append(unreadable, dirs[i])
		case "a":
			if f[2] != "ok" {
				unwr[dirs[i]] = f[2]
			}
		default:
			out[dirs[i]] = append(out[dirs[i]], segments.Entry{Name: f[2], IsDir: f[1] == "d", TopicID: f[3]})
		}
	})
	if err != nil {
		return nil, bad, nil, fmt.Errorf("list log dirs on broker %d: %w", broker, err)
	}
	if len(unreadable) > 0 {
		return nil, bad, nil, fmt.Errorf("%w: log dir(s) %v on broker %d's host exist but the user kremedy's commands run as cannot enter them (Kafka's data is usually its service user's alone): set `become: sudo` in the inventory (ssh.become, or the broker's become) so that every command runs through sudo -n, or log in as a user that may read them", ports.ErrRefused, unreadable, broker)
	}
	if len(missing) > 0 {
		return nil, bad, nil, fmt.Errorf("%w: log dir(s) %v do not exist on broker %d's host; check log_dirs in the inventory", ports.ErrRefused, missing, broker)
	}
	return out, bad, unwr, nil
}
