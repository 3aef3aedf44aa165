package invalidate

import (
	"errors"
	"strconv"
	"strings"

	"github.com/invalidator-go/invalidator/events"
)

// errRules marks invalid rules; start-up stops on it. (A bad cache setting is elasticache.ErrConfig.)
var errRules = errors.New("invalid invalidation rules")

// errPlan is wrapped by the errors of a change whose keys cannot be planned
// safely: a placeholder is missing or empty, or a key is too long. The
// record fails rather than deleting a wrong key.
var errPlan = errors.New("cannot plan cache keys")

// source says which part of a change a placeholder reads.
type source uint8

const (
	literal source = iota
	srcEntity
	srcID
	srcOp
	srcVersion
	srcTable
	srcKey  // key.NAME: a key attribute of a stream record
	srcNew  // new.PATH: the NewImage
	srcOld  // old.PATH: the OldImage
	srcItem // item.PATH: both images, each distinct value
)

var scalarNames = map[string]source{
	"entity": srcEntity, "id": srcID, "op": srcOp, "version": srcVersion, "table": srcTable,
}

var imagePrefixes = map[string]source{"key": srcKey, "new": srcNew, "old": srcOld, "item": srcItem}

type segment struct {
	src  source
	text string   // the literal, or the placeholder as written, for errors
	path []string // attribute path for key/new/old/item
}

// template is a compiled key template such as "cache:{entity}:{id}".
type template struct {
	raw      string
	segments []segment
}

// maxKeysPerTemplate bounds the keys one template may expand to (sets and
// both images multiply): a runaway rule fails its record, not the cache.
const maxKeysPerTemplate = 1000

func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// parseTemplate compiles a template. A placeholder is a name in braces,
// {id}; any other brace is literal, so hash tags such as {product:{id}}
// pass through, and "{{" writes a literal "{" before a name. streamOnly
// placeholders (key., new., old., item.) are refused unless allowImages.
func parseTemplate(raw string, allowImages bool) (template, error) {
	t := template{raw: raw}
	if strings.TrimSpace(raw) == "" {
		return t, configErr(raw, "empty template")
	}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.segments = append(t.segments, segment{src: literal, text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(raw); {
		if strings.HasPrefix(raw[i:], "{{") {
			lit.WriteByte('{')
			i += 2
			continue
		}
		if raw[i] != '{' {
			lit.WriteByte(raw[i])
			i++
			continue
		}
		j := i + 1
		for j < len(raw) && isNameByte(raw[j]) {
			j++
		}
		if j == i+1 || j >= len(raw) || raw[j] != '}' {
			lit.WriteByte('{') // a hash tag's brace
			i++
			continue
		}
		seg, err := parsePlaceholder(raw, raw[i+1:j], allowImages)
		if err != nil {
			return t, err
		}
		flush()
		t.segments = append(t.segments, seg)
		i = j + 1
	}
	flush()
	return t, nil
}

func parsePlaceholder(raw, name string, allowImages bool) (segment, error) {
	written := "{" + name + "}"
	if src, ok := scalarNames[name]; ok {
		return segment{src: src, text: written}, nil
	}
	prefix, path, dotted := strings.Cut(name, ".")
	src, ok := imagePrefixes[prefix]
	if !ok || !dotted {
		return segment{}, configErr(raw, "unknown placeholder "+written+
			" (use entity, id, op, version, table, key.NAME, new.PATH, old.PATH or item.PATH; write {{ for a literal brace)")
	}
	if !allowImages {
		return segment{}, configErr(raw, "placeholder "+written+" reads a DynamoDB item: only table rules may use it")
	}
	parts := strings.Split(path, ".")
	for _, p := range parts {
		if p == "" {
			return segment{}, configErr(raw, "placeholder "+written+" has an empty attribute name")
		}
	}
	if src == srcKey && len(parts) > 1 {
		return segment{}, configErr(raw, "placeholder "+written+": key attributes have no nested path")
	}
	return segment{src: src, text: written, path: parts}, nil
}

func configErr(template, reason string) error {
	return &configError{template: template, reason: reason}
}

type configError struct{ template, reason string }

func (e *configError) Error() string {
	return "template " + strconv.Quote(e.template) + ": " + e.reason
}

func (e *configError) Unwrap() error { return errRules }

// planError says why a change's keys could not be planned.
type planError struct {
	Template string // the template, or "" for an explicit key
	Reason   string
	whole    bool // the record is past its cap: none of its keys is sent
}

func (e *planError) Error() string {
	if e.Template == "" {
		return e.Reason
	}
	return "template " + strconv.Quote(e.Template) + ": " + e.Reason
}

func (e *planError) Unwrap() error { return errPlan }

// overCap says whether err is a record's past maxPerRecord: it is parked
// with none of its keys sent, as their deletes alone, 50,000 UNLINKs,
// would take a small function's CPU for seconds (bench's hostile
// Multiply), and the record is replayed whole.
func overCap(err error) bool {
	var pe *planError
	return errors.As(err, &pe) && pe.whole
}

// expand appends the keys this template gives for the change, those that
// fit in room: one too long is not built, nor one past the record's.
func (t *template) expand(c *events.Change, dst []string, room keyRoom, reads *imageReads) ([]string, error) {
	left := room.left(dst)
	if left <= 0 {
		return dst, room.full()
	}
	// The common case, only scalar placeholders, makes exactly one key.
	if t.scalarOnly() {
		// Values first, then one allocation of the key's exact size.
		var stack [8]string
		values, n := stack[:0], 0
		for i := range t.segments {
			v, err := t.scalar(&t.segments[i], c)
			if err != nil {
				return dst, err
			}
			values, n = append(values, v), n+len(v)
		}
		return append(dst, join(values, n)), nil
	}
	// A placeholder on an image the record cannot have plans no key, whatever
	// the others hold: seen first, before any set is read.
	for i := range t.segments {
		if t.segments[i].noImage(c) {
			return dst, nil
		}
	}
	// Each segment's distinct values must fit what the segments before it
	// leave of the cap (every later one gives at least one).
	values := make([][]string, len(t.segments))
	n := 1
	for i := range t.segments {
		seg := &t.segments[i]
		if seg.src < srcKey {
			v, err := t.scalar(seg, c)
			if err != nil {
				return dst, err
			}
			values[i] = []string{v}
			continue
		}
		// The first value always counts: a template gives at least one key.
		switch read := reads.of(seg, c); {
		case len(read.values) > max(min(maxKeysPerTemplate, left)/n, 1):
			if left < maxKeysPerTemplate { // the record's room bounds the template
				return dst, room.full()
			}
			return dst, &planError{Template: t.raw, Reason: "expands to more than " + strconv.Itoa(maxKeysPerTemplate) + " keys"}
		case read.reason != "":
			return dst, &planError{Template: t.raw, Reason: read.reason}
		default:
			values[i] = read.values
		}
		n *= len(values[i])
	}
	// Every combination of one value of each segment, the last segment's
	// changing fastest, each measured before it is built: a long string
	// crossed with a set would otherwise make a long key per member.
	var first error
	pick, key := make([]int, len(values)), make([]string, len(values))
	for {
		size := 0
		for i, vs := range values {
			key[i] = vs[pick[i]]
			size += len(key[i])
		}
		if reason := room.over(size); reason == "" {
			dst = append(dst, join(key, size))
		} else if first == nil {
			first = &planError{Template: t.raw, Reason: reason}
		}
		i := len(pick) - 1
		for ; i >= 0; i-- {
			if pick[i]++; pick[i] < len(values[i]) {
				break
			}
			pick[i] = 0
		}
		if i < 0 {
			return dst, first
		}
	}
}

// join is the parts, of n bytes together, in one allocation.
func join(parts []string, n int) string {
	var b strings.Builder
	b.Grow(n)
	for _, p := range parts {
		b.WriteString(p)
	}
	return b.String()
}

// read adds to attrs the paths the template reads in an item's images.
func (t *template) read(attrs events.Attributes) {
	for _, seg := range t.segments {
		if seg.src >= srcKey { // a database's row holds its key among its columns
			a := attrs
			for _, name := range seg.path {
				if a[name] == nil {
					a[name] = events.Attributes{}
				}
				a = a[name]
			}
		}
	}
}

func (t *template) scalarOnly() bool {
	for i := range t.segments {
		if t.segments[i].src >= srcKey {
			return false
		}
	}
	return true
}

func (t *template) scalar(seg *segment, c *events.Change) (string, error) {
	var v string
	switch seg.src {
	case literal:
		return seg.text, nil
	case srcEntity:
		v = c.Entity
	case srcID:
		v = c.ID
	case srcOp:
		v = string(c.Op)
	case srcTable:
		v = c.Table
	case srcVersion:
		if !c.HasVersion {
			return "", &planError{Template: t.raw, Reason: "placeholder {version}: the change has no version"}
		}
		return strconv.FormatInt(c.Version, 10), nil
	}
	if v == "" && seg.src == srcID && c.Source.CommitLog() {
		return "", &planError{Template: t.raw, Reason: "a database's row has no {id}: give its table a rule under tables"}
	}
	if v == "" {
		return "", &planError{Template: t.raw, Reason: "placeholder " + seg.text + " is missing or empty"}
	}
	return v, nil
}

// images are the images an attribute placeholder reads, nil where the
// record has none.
func (seg *segment) images(c *events.Change) []events.Image {
	switch seg.src {
	case srcKey:
		if c.Source.CommitLog() {
			return []events.Image{c.OldImage, c.NewImage} // a key an update changed, both
		}
		return []events.Image{c.ItemKey}
	case srcNew:
		return []events.Image{c.NewImage}
	case srcOld:
		return []events.Image{c.OldImage}
	default: // srcItem
		return []events.Image{c.OldImage, c.NewImage, c.ItemKey}
	}
}

// noImage says whether the placeholder reads an image the change cannot
// have: new. on REMOVE, old. on INSERT. Any other absent image is an
// error (imageValues): the stream view type does not carry what the rule
// needs, and planning nothing would skip keys.
func (seg *segment) noImage(c *events.Change) bool {
	return seg.src == srcNew && c.Op == events.OpDelete && c.NewImage == nil ||
		seg.src == srcOld && c.Op == events.OpCreate && c.OldImage == nil
}

// imageHint says what makes a source send the images rules read: a
// database's row before an update names only its key by default, and an
// {item.} placeholder over the row after alone would miss the old value.
func imageHint(source events.Source) string {
	switch source {
	case events.SourceDMS:
		return "the DMS task sends the row before an update with BeforeImageSettings: FieldName before-image, ColumnFilter all; PostgreSQL sends its old values with the table's REPLICA IDENTITY FULL"
	case events.SourceDebezium:
		return "PostgreSQL sends the old values of a row with the table's REPLICA IDENTITY FULL"
	case events.SourceDSQL:
		return "Aurora DSQL sends no row before an update and only the key before a delete: plan its tables from {new.} and {key.}"
	default:
		return "is the stream NEW_AND_OLD_IMAGES?"
	}
}

// imageReads are the distinct values of each attribute placeholder a
// change has given, by the placeholder as written, each read once however
// many templates name it: rules of thousands of templates over one set
// would otherwise read and deduplicate it for each (bench's hostile
// Multiply), so a change's reads stay linear in its images.
type imageReads map[string]imageRead

// imageRead is a placeholder's distinct values, read up to one past the
// most a template may take (a set too large stops at its first value past
// it, not after its last), and why none can be planned, if so: a template
// whose cap the values read pass fails for that first, as it would have
// had it read only up to its cap.
type imageRead struct {
	values []string
	reason string
}

func (r *imageReads) of(seg *segment, c *events.Change) imageRead {
	if read, ok := (*r)[seg.text]; ok {
		return read
	}
	if *r == nil {
		*r = imageReads{}
	}
	read := distinctValues(seg, c, maxKeysPerTemplate+1)
	(*r)[seg.text] = read
	return read
}

// distinctValues reads the distinct texts of an attribute placeholder,
// stopping at limit of them.
func distinctValues(seg *segment, c *events.Change, limit int) imageRead {
	// A database's row before an update carries only its key unless told
	// otherwise: an {item.} placeholder must not quietly read the row after
	// alone.
	if seg.src == srcItem && c.Op == events.OpUpdate && c.Source.CommitLog() {
		if _, ok := c.OldImage.Lookup(seg.path); !ok {
			return imageRead{reason: "placeholder " + seg.text + ": the row before the update does not carry it (" + imageHint(c.Source) + ")"}
		}
	}
	var values []string
	var seen map[string]bool // after the first value: sets are deduplicated in linear time
	present, found := false, false
	for _, image := range seg.images(c) {
		if image == nil {
			continue
		}
		present = true
		av, ok := image.Lookup(seg.path)
		if !ok {
			continue
		}
		found = true
		texts, err := av.Text()
		if err != nil && av.Type == events.TypeNull && c.Source.CommitLog() {
			return imageRead{values: values, reason: "placeholder " + seg.text + ": " + err.Error() + " (if the column is not: " + imageHint(c.Source) + ")"}
		}
		if err != nil {
			return imageRead{values: values, reason: "placeholder " + seg.text + ": " + err.Error()}
		}
		for _, text := range texts {
			switch {
			case text == "":
				return imageRead{values: values, reason: "placeholder " + seg.text + " is empty"}
			case len(values) == 0:
				values = append(values, text)
			case seen[text] || len(values) == 1 && values[0] == text:
				continue
			default:
				if seen == nil {
					seen = map[string]bool{values[0]: true}
				}
				seen[text] = true
				values = append(values, text)
			}
			if len(values) == limit {
				return imageRead{values: values}
			}
		}
	}
	switch {
	case !present:
		return imageRead{reason: "placeholder " + seg.text + ": the record carries no such image (" + imageHint(c.Source) + ")"}
	case !found && c.RowPart != "":
		return imageRead{reason: "placeholder " + seg.text + " is not in the part of the row that came: " + c.RowPart}
	case !found && c.Source.CommitLog():
		return imageRead{reason: "placeholder " + seg.text + " is missing from the row (" + imageHint(c.Source) + ")"}
	case !found:
		return imageRead{reason: "placeholder " + seg.text + " is missing from the item"}
	case len(values) == 0:
		return imageRead{reason: "placeholder " + seg.text + " is an empty set"}
	}
	return imageRead{values: values}
}
