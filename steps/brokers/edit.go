package brokers

import (
	"fmt"

	"github.com/kremedy/kremedy/internal/shell"
)

// EditScript replaces the file path if it is still what the plan read
// (sha256 from; "" for a file the plan saw absent, made new): it keeps the
// file it replaces as backup (an older, different backup of the same
// name is renamed, never overwritten) and writes the new content, read
// from its standard input, beside it (0600 until it is complete and
// checked), then renames it over the file. The script is fixed text, the
// quoted paths and the digests: sudo logs it and ps shows it, so no byte
// of the content is in it. It reads its input to the end before anything
// else, so that the sender never writes into a closed session. A new file
// takes the mode 0644 and the owner of its directory. Exit 3: the file
// changed since the plan; exit 4: the content that arrived is not the
// planned one.
func EditScript(path, backup, from, to string) string {
	if from == "" {
		return shell.Script(fmt.Sprintf(`set -eu
umask 077
f=%s; t=%s
cat > "$t"
got=$(sha256sum -- "$t" | cut -d' ' -f1)
if [ "$got" != %s ]; then rm -f -- "$t"; echo "$f: the content received has sha256 $got, not the planned one; nothing was written" >&2; exit 4; fi
if [ -e "$f" ]; then
  cur=$(sha256sum -- "$f" | cut -d' ' -f1)
  rm -f -- "$t"
  if [ "$cur" = %s ]; then echo "$f is already as planned"; exit 0; fi
  echo "$f appeared since the plan (sha256 $cur)" >&2; exit 3
fi
chmod 0644 -- "$t"
chown --reference="$(dirname -- "$f")" -- "$t" 2>/dev/null || true
mv -f -- "$t" "$f"
echo "$f written"`, shell.Quote(path), shell.Quote(path+".kremedy-new"), shell.Quote(to), shell.Quote(to)))
	}
	return shell.Script(fmt.Sprintf(`set -eu
umask 077
f=%s; b=%s; t=%s
cat > "$t"
got=$(sha256sum -- "$t" | cut -d' ' -f1)
if [ "$got" != %s ]; then rm -f -- "$t"; echo "$f: the content received has sha256 $got, not the planned one; nothing was written" >&2; exit 4; fi
cur=$(sha256sum -- "$f" | cut -d' ' -f1)
if [ "$cur" = %s ]; then rm -f -- "$t"; echo "$f is already as planned"; exit 0; fi
if [ "$cur" != %s ]; then rm -f -- "$t"; echo "$f changed since the plan (sha256 $cur)" >&2; exit 3; fi
if [ -e "$b" ] && ! cmp -s -- "$f" "$b"; then mv -- "$b" "$b.$(date -u +%%Y%%m%%dT%%H%%M%%SZ)"; fi
cp -p -- "$f" "$b"
chmod --reference="$f" -- "$t"
chown --reference="$f" -- "$t" 2>/dev/null || true
mv -f -- "$t" "$f"
echo "$f edited; the file before it is $b"`, shell.Quote(path), shell.Quote(backup), shell.Quote(path+".kremedy-new"), shell.Quote(to), shell.Quote(to), shell.Quote(from)))
}
