package events

import (
	"hash/crc32"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// Aurora DSQL writes a change record of more than 9 MiB as a main record
// ("type": "chunked") whose before or after image is replaced by a
// reference under "chunked" — {"chunk_id", "total_fragments", "crc32c"} —
// and the image's JSON text in fragments, each a Kinesis record of its own
// ({"type": "fragment", "chunk_id", "index", "data"}), on any shard, in any
// order (AWS's record-format page, "Handling oversized records").

// maxFragments bounds a chunked image's fragments before any is looked
// for: a Lambda batch holds at most 10,000 records.
const maxFragments = 10_000

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Fragment is a piece of an Aurora DSQL image too large for one Kinesis
// record: by itself it names no table and no row, and changes nothing; its
// main record carries the change.
type Fragment struct {
	Chunk string
	Index int
	Data  []byte // the piece of the image's JSON text, unescaped
}

// Unjoined is the error of an Aurora DSQL main record whose row came in
// fragments: Join plans it from the fragments that came with it. Left
// unjoined it fails for good, to be parked with its reason: the worker
// never waits for fragments that another shard's batch may bring.
type Unjoined struct {
	record      string
	table       string
	op          Op
	opText      string
	at          time.Time
	keep        Attributes
	before      Image
	after       Image
	chunkBefore *chunkRef
	chunkAfter  *chunkRef
}

// chunkRef is an image's entry under "chunked".
type chunkRef struct {
	id    string
	total int
	crc   uint32
}

func (u *Unjoined) Error() string {
	ref, name := u.needed()
	if ref == nil { // the image its keys read is inline, the other is not
		ref, name = u.chunkBefore, "before"
		if ref == nil {
			ref, name = u.chunkAfter, "after"
		}
	}
	return "its row " + name + " is in " + strconv.Itoa(ref.total) + " fragments (chunk_id " + strconv.Quote(truncate([]byte(ref.id))) +
		"), Kinesis records of their own: it is planned from those its Kinesis batch holds"
}

// Chunks are the chunk IDs of the record's images that came in fragments.
func (u *Unjoined) Chunks() []string {
	var ids []string
	for _, ref := range []*chunkRef{u.chunkBefore, u.chunkAfter} {
		if ref != nil {
			ids = append(ids, ref.id)
		}
	}
	return ids
}

// reason is what the record is, for its errors.
func (u *Unjoined) reason() string {
	return "an Aurora DSQL record of " + truncate([]byte(u.table)) + " whose row came in fragments"
}

// needed is the image the change's keys are planned from, and its name.
func (u *Unjoined) needed() (*chunkRef, string) {
	if u.op == OpDelete {
		return u.chunkBefore, "before"
	}
	return u.chunkAfter, "after"
}

// Join plans the record from the fragments at hand, by chunk ID: an image
// whose fragments are all there is joined and checked against its CRC32C;
// of the image its keys read, fragment 0 alone gives the columns it holds
// whole, and a key that reads any other column fails, naming the part it
// had; an image its keys do not read is left out unless whole. Otherwise
// the record fails, saying how many of its fragments are at hand.
func (u *Unjoined) Join(fragments *Fragments) ([]Change, error) {
	before, after := u.before, u.after
	needed, _ := u.needed()
	var part string
	for _, side := range []struct {
		ref   *chunkRef
		name  string
		image *Image
	}{{u.chunkBefore, "before", &before}, {u.chunkAfter, "after", &after}} {
		if side.ref == nil {
			continue
		}
		j := fragments.image(*side.ref, side.name, u.keep)
		switch {
		case j.have == side.ref.total && j.err != nil, side.ref == needed && j.first && j.err != nil:
			return nil, recordError(u.record, j.err)
		case j.have == side.ref.total:
			*side.image = maps.Clone(j.img)
		case side.ref != needed:
		case j.first:
			*side.image = maps.Clone(j.img)
			part = "the first " + strconv.Itoa(j.bytes) + " bytes of the row " + side.name + ", its fragment 0 of " + strconv.Itoa(side.ref.total) +
				" (chunk_id " + strconv.Quote(truncate([]byte(side.ref.id))) + "); the others are on other shards"
		default:
			return nil, recordError(u.record, invalid(u.reason()+": "+strconv.Itoa(j.have)+" of the "+strconv.Itoa(side.ref.total)+
				" fragments of its row "+side.name+" (chunk_id "+strconv.Quote(truncate([]byte(side.ref.id)))+") are at hand,"+
				" not its fragment 0: the others are on other shards, which the worker does not wait for"))
		}
	}
	c, err := rowOf(SourceDSQL, u.table, u.op, u.opText, after, before, u.at)
	if err != nil {
		return nil, recordError(u.record, err)
	}
	c.RowPart = part
	return []Change{c}, nil
}

// Fragments are the Aurora DSQL fragments at hand, by chunk ID, a fragment
// delivered twice once. Each image is joined and decoded once, however many
// records name it, so that a batch's work stays linear in its size. Add
// them all, then Join from any number of goroutines; an Add after a Join
// joins again what it adds to.
type Fragments struct {
	mu     sync.Mutex
	chunks map[string]*chunk
}

type chunk struct {
	pieces map[int][]byte
	joins  map[joinKey]*joined
}

type joinKey struct {
	ref  chunkRef
	name string
}

// joined is an image as its fragments at hand give it: how many of them
// there are, whether fragment 0 is; the image, whole, or else the columns
// fragment 0 holds whole and how many bytes they take; or why not.
type joined struct {
	once  sync.Once
	have  int
	first bool
	img   Image
	bytes int
	err   error
}

// Add keeps a fragment.
func (fs *Fragments) Add(f Fragment) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.chunks == nil {
		fs.chunks = map[string]*chunk{}
	}
	c := fs.chunks[f.Chunk]
	if c == nil {
		c = &chunk{pieces: map[int][]byte{}}
		fs.chunks[f.Chunk] = c
	}
	if _, dup := c.pieces[f.Index]; !dup {
		c.pieces[f.Index] = f.Data
		c.joins = nil
	}
}

// image is ref's image from the fragments at hand, joined once.
func (fs *Fragments) image(ref chunkRef, name string, keep Attributes) *joined {
	if fs == nil {
		return &joined{}
	}
	fs.mu.Lock()
	c := fs.chunks[ref.id]
	if c == nil {
		fs.mu.Unlock()
		return &joined{}
	}
	key := joinKey{ref, name}
	j := c.joins[key]
	if j == nil {
		if c.joins == nil {
			c.joins = map[joinKey]*joined{}
		}
		j = &joined{}
		c.joins[key] = j
	}
	pieces := c.pieces
	fs.mu.Unlock()
	j.once.Do(func() {
		for i := range pieces {
			if i < ref.total {
				j.have++
			}
		}
		_, j.first = pieces[0]
		switch {
		case j.have == ref.total:
			j.img, j.err = wholeImage(name, ref, pieces, keep)
		case j.first:
			j.img, j.bytes, j.err = leadingColumns("Aurora DSQL "+name+", fragment 0", pieces[0], keep)
		}
	})
	return j
}

// wholeImage is an image from all its fragments, checked against its CRC32C.
func wholeImage(name string, ref chunkRef, pieces map[int][]byte, keep Attributes) (Image, error) {
	var text []byte
	for i := range ref.total {
		text = append(text, pieces[i]...)
	}
	if sum := crc32.Checksum(text, castagnoli); sum != ref.crc {
		return nil, invalid("the " + strconv.Itoa(ref.total) + " fragments of an Aurora DSQL row " + name +
			" (chunk_id " + strconv.Quote(truncate([]byte(ref.id))) + ") join into text whose CRC32C is " +
			strconv.FormatUint(uint64(sum), 10) + ", not " + strconv.FormatUint(uint64(ref.crc), 10))
	}
	img, end, err := decodeRow("Aurora DSQL "+name, text, 0, keep)
	if err == nil && jsonscan.SkipSpace(text, end) != len(text) {
		err = invalid("Aurora DSQL " + name + ": text after the joined row")
	}
	return img, err
}

// leadingColumns decodes the columns a row's first fragment holds whole: a
// member counts only once the comma or brace after it came, since a
// fragment ends anywhere, a number's digits included. It returns them and
// how many bytes of text they take.
func leadingColumns(name string, text []byte, keep Attributes) (Image, int, error) {
	whole := 0
	_, _ = jsonscan.WalkAt(text, 0, func(_ []byte, i int) (int, error) {
		_, end, err := jsonscan.ValueAt(text, i)
		if next := jsonscan.SkipSpace(text, end); err == nil && next < len(text) && (text[next] == ',' || text[next] == '}') {
			whole = next
		}
		return end, err
	})
	if whole == 0 {
		return nil, 0, invalid(name + " holds no whole column")
	}
	row := append(text[:whole:whole], '}')
	img, _, err := decodeRow(name, row, 0, keep)
	return img, whole, err
}

// chunkedImages reads a main record's "chunked" member.
func chunkedImages(f *fields) (before, after *chunkRef, err error) {
	if f.chunked.kind != jsonscan.Object {
		return nil, nil, invalid("an Aurora DSQL record of type chunked needs its chunked object")
	}
	err = jsonscan.Members(f.chunked.raw, func(key, value []byte, kind jsonscan.Kind) error {
		ref, err := chunkRefOf(string(key), value, kind)
		switch string(key) {
		case "before":
			before = ref
		case "after":
			after = ref
		}
		return err
	})
	if err == nil && before == nil && after == nil {
		err = invalid("an Aurora DSQL record of type chunked names no chunked image")
	}
	return before, after, err
}

func chunkRefOf(name string, raw []byte, kind jsonscan.Kind) (*chunkRef, error) {
	if name != "before" && name != "after" || kind == jsonscan.Null {
		return nil, nil
	}
	if kind != jsonscan.Object {
		return nil, invalid("Aurora DSQL chunked." + name + " must be an object, not " + kind.String())
	}
	ref := &chunkRef{}
	var haveCRC bool
	err := jsonscan.Members(raw, func(key, value []byte, kind jsonscan.Kind) error {
		var err error
		switch string(key) {
		case "chunk_id":
			ref.id, err = nonEmptyText("Aurora DSQL chunked."+name+".chunk_id", value, kind)
		case "total_fragments":
			n, perr := strconv.Atoi(string(value))
			if kind != jsonscan.Number || perr != nil || n < 1 || n > maxFragments {
				err = invalid("Aurora DSQL chunked." + name + ".total_fragments must be a whole number from 1 to " + strconv.Itoa(maxFragments) + ", not " + truncate(value))
			}
			ref.total = n
		case "crc32c":
			var text string
			if text, err = stringField("Aurora DSQL chunked."+name+".crc32c", value, kind); err == nil {
				crc, perr := strconv.ParseUint(text, 10, 32)
				if perr != nil {
					err = invalid("Aurora DSQL chunked." + name + ".crc32c must be a decimal CRC32C, not " + truncate(value))
				}
				ref.crc, haveCRC = uint32(crc), true
			}
		}
		return err
	})
	if err == nil && (ref.id == "" || ref.total == 0 || !haveCRC) {
		err = invalid("Aurora DSQL chunked." + name + " needs its chunk_id, total_fragments and crc32c")
	}
	return ref, err
}

// decodeFragment validates a fragment, which changes nothing by itself.
func decodeFragment(f *fields) (Fragment, error) {
	var fr Fragment
	var err error
	if fr.Chunk, err = nonEmptyText("an Aurora DSQL fragment's chunk_id", f.chunkID.raw, f.chunkID.kind); err != nil {
		return fr, err
	}
	n, perr := strconv.Atoi(string(f.index.raw))
	if f.index.kind != jsonscan.Number || perr != nil || n < 0 || n >= maxFragments {
		return fr, invalid("an Aurora DSQL fragment's index must be a whole number below " + strconv.Itoa(maxFragments) + ", not " + truncate(f.index.raw))
	}
	fr.Index = n
	if f.data.kind != jsonscan.String {
		return fr, invalid("an Aurora DSQL fragment's data must be a string, not " + f.data.kind.String())
	}
	fr.Data, _, err = jsonscan.AppendStringAt(nil, f.data.raw, 0)
	return fr, err
}

// FragmentOf returns the Aurora DSQL fragment a record of a Lambda Kinesis
// event carries, if it is one.
func FragmentOf(raw []byte) (Fragment, bool) {
	d, _, err := decodeKinesis(raw, nil)
	if err != nil || firstByte(d.message) != '{' {
		return Fragment{}, false
	}
	f, err := collect(d.message)
	defer f.release()
	if err != nil || !textIs(f.recordType.raw, "fragment") {
		return Fragment{}, false
	}
	fr, err := decodeFragment(&f)
	return fr, err == nil
}

// unjoined is the error of a main record, for Join to complete.
func unjoined(f *fields, u Unjoined) error {
	var err error
	if u.chunkBefore, u.chunkAfter, err = chunkedImages(f); err != nil {
		return err
	}
	if needed, name := u.needed(); needed == nil && (name == "after" && u.after == nil || name == "before" && u.before == nil) {
		return invalid("an Aurora DSQL record of type chunked has its row " + name + " neither inline nor chunked")
	}
	return &fieldError{reason: u.reason(), err: &u}
}
