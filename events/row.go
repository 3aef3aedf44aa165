package events

import (
	"github.com/invalidator-go/invalidator/internal/jsonscan"
)

// typeUnavailable is the type of a column whose value its source did not send:
// Debezium's placeholder for an unchanged TOASTed PostgreSQL column, when
// the row before the change does not carry it either.
const typeUnavailable AttributeType = "unavailable"

// unavailable is Debezium's placeholder (unavailable.value.placeholder).
const unavailable = "__debezium_unavailable_value"

// decodeRow decodes a database row as JSON — an object of columns, as DMS
// and Debezium write one — at data[i] into an image, the columns keep names
// (nil: all; the others only checked to be JSON): a string column
// becomes S, a number N (its text), true and false BOOL, null NULL, an
// object M, nested as far as DynamoDB's images may be, and an array L,
// only checked to be JSON: no placeholder reads into a list. It
// returns the index after it; a row that is null is no image (nil).
func decodeRow(name string, data []byte, i int, keep Attributes) (Image, int, error) {
	if i < len(data) && data[i] == 'n' {
		kind, end, err := jsonscan.ValueAt(data, i)
		if err == nil && kind != jsonscan.Null {
			err = invalid(name + " must be an object or null")
		}
		return nil, end, err
	}
	return decodeColumns(name, data, i, 0, keep)
}

func decodeColumns(name string, data []byte, i, depth int, keep Attributes) (Image, int, error) {
	if !startsWith(data, i, '{') {
		return nil, i, notA(data, i, name+" must be an object")
	}
	if depth > maxNesting {
		return nil, i, invalid(name + ": values nested deeper than 32 levels")
	}
	row := Image{}
	end, err := jsonscan.WalkAt(data, i, func(key []byte, i int) (int, error) {
		sub, kept := keep[string(key)]
		if keep != nil && !kept {
			_, end, err := jsonscan.ValueAt(data, i)
			return end, err
		}
		v, end, err := decodeColumn(name, data, i, depth, sub)
		if err == nil {
			row[string(key)] = v
		}
		return end, err
	})
	return row, end, err
}

func decodeColumn(name string, data []byte, i, depth int, keep Attributes) (AttributeValue, int, error) {
	switch {
	case startsWith(data, i, '{'):
		m, end, err := decodeColumns(name, data, i, depth+1, keep)
		return AttributeValue{Type: TypeMap, M: m}, end, err
	case startsWith(data, i, '['): // only checked: no path reads into a list
		_, end, err := jsonscan.ValueAt(data, i)
		return AttributeValue{Type: TypeList}, end, err
	}
	kind, end, err := jsonscan.ValueAt(data, i)
	if err != nil {
		return AttributeValue{}, end, err
	}
	switch kind {
	case jsonscan.String:
		text, err := jsonscan.Text(data[i:end])
		if text == unavailable {
			return AttributeValue{Type: typeUnavailable}, end, err
		}
		return AttributeValue{Type: TypeString, S: text}, end, err
	case jsonscan.Number:
		return AttributeValue{Type: TypeNumber, S: string(data[i:end])}, end, nil
	case jsonscan.True, jsonscan.False:
		return AttributeValue{Type: TypeBoolean, BOOL: kind == jsonscan.True}, end, nil
	default:
		return AttributeValue{Type: TypeNull}, end, nil
	}
}

// rowChange is the change of a database's row: its table, what was done,
// and the row after and before, as its reader wrote them; no ItemKey: a
// row's key is read from both rows (a key changed by an update, from 46 to
// 45, invalidates both). Unchanged
// columns the row after lacks (typeUnavailable) are taken from the row
// before when it has them.
func rowChange(source Source, table string, op Op, after, before Image) Change {
	for col, v := range after {
		if old, ok := before[col]; ok && v.Type == typeUnavailable && op == OpUpdate {
			after[col] = old
		}
	}
	return Change{Entity: table, Table: table, Op: op, Source: source, NewImage: after, OldImage: before}
}
