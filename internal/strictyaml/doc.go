// Package strictyaml reads small, hand-written YAML configuration files
// strictly and reports every problem at its place in the file. goccy's
// Unmarshal is too forgiving for files that drive repairs (it reads
// "id: 1.5" as 1 and an empty value as 0), so a Decoder walks goccy's AST
// instead: Parse limits size and nesting, refuses several documents,
// anchors, aliases, merge keys, complex keys and tags; Object and List
// decode mappings and sequences, reporting unknown keys; Str, Text, Strs,
// Bool, Int and Duration decode scalars of exactly their type. Every
// problem is an *Error reading file:line:column: message, and Err returns
// them all, in file order, joined with errors.Join. Packages describe their
// own schema with these pieces (see inventory and runbooks).
package strictyaml
