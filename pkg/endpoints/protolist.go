package endpoints

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// protobufMagic starts every object in the API server's protobuf encoding; a
// runtime.Unknown follows, whose raw field holds the object itself.
var protobufMagic = [4]byte{0x6b, 0x38, 0x73, 0x00}

// maxListItemBytes bounds one field read into memory (an item, the list's
// metadata): etcd refuses objects over 1.5 MiB by default, and a length past
// this is a broken stream, not an object to allocate for. The list itself is
// streamed, and may be larger (100k EndpointSlices are ~100 MiB).
const maxListItemBytes = 64 << 20

// protoItem is a list item type with its generated protobuf unmarshaller.
type protoItem interface {
	runtime.Object
	Unmarshal([]byte) error
	Reset()
}

// itemTrim copies an item's bytes without what svcproxy never reads (see
// trimmer); nil keeps every field.
type itemTrim func(*trimmer, []byte) ([]byte, error)

var errNotProtobuf = errors.New("not the protobuf encoding")

// decodeProtobufList reads a list of kind (ServiceList, EndpointSliceList) in
// the protobuf encoding from r and hands each item, unmarshalled into
// newItem(), to each before reading the next. Every item is unmarshalled into
// the same object (reset, its endpoints' list reused): each must keep nothing
// of it after it returns, as the trackers do, which copy what they keep (the
// typed objects and their endpoint lists were 180 of the 1324 MB a 100k cold
// start allocated). Memory holds one item whatever
// the list's size, where the generated decoder wants the whole body and then
// the whole list of objects (a 30k Service list served at once from the watch
// cache, which ignores limit at resource version "0", took svcproxy's peak
// past 350 MiB). It returns the list's metadata (its resource version and
// continue token). A body without the protobuf magic is errNotProtobuf, with
// nothing consumed past the magic. Each item goes through trim first.
func decodeProtobufList(r *bufio.Reader, kind string, newItem func() protoItem, trim itemTrim, each func(runtime.Object) error) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	magic, err := r.Peek(len(protobufMagic))
	if err != nil || [4]byte(magic) != protobufMagic {
		return lm, errNotProtobuf
	}
	w := &wireReader{r: r, end: -1}
	if _, err := w.skip(len(protobufMagic)); err != nil {
		return lm, err
	}
	listed := false
	// runtime.Unknown: 1 typeMeta, 2 raw, 3 contentEncoding, 4 contentType.
	for {
		field, wire, err := w.tag()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return lm, err
		}
		switch {
		case field == 1 && wire == wireBytes:
			b, err := w.bytes()
			if err != nil {
				return lm, err
			}
			var tm runtime.TypeMeta
			if err := tm.Unmarshal(b); err != nil {
				return lm, fmt.Errorf("type meta: %w", err)
			}
			if tm.Kind != "" && tm.Kind != kind {
				return lm, fmt.Errorf("got a %s, want a %s", tm.Kind, kind)
			}
		case field == 2 && wire == wireBytes:
			if listed {
				return lm, errors.New("two lists in one body")
			}
			n, err := w.length()
			if err != nil {
				return lm, err
			}
			if lm, err = decodeListBody(w, w.read+n, newItem, trim, each); err != nil {
				return lm, err
			}
			listed = true
		case field == 3 && wire == wireBytes:
			b, err := w.bytes()
			if err != nil {
				return lm, err
			}
			if len(b) > 0 {
				return lm, fmt.Errorf("content encoding %q", b)
			}
		default:
			if err := w.skipField(wire); err != nil {
				return lm, err
			}
		}
	}
	if !listed {
		return lm, errors.New("no list in the body")
	}
	return lm, nil
}

// decodeListBody reads a list message (1 metadata, 2 items) that ends at end.
func decodeListBody(w *wireReader, end int64, newItem func() protoItem, trim itemTrim, each func(runtime.Object) error) (metav1.ListMeta, error) {
	var lm metav1.ListMeta
	var t trimmer
	item := newItem() // every item's: see decodeProtobufList
	outer := w.end
	w.end = end
	for w.read < end {
		field, wire, err := w.tag()
		if err != nil {
			return lm, unexpected(err)
		}
		switch {
		case field == 1 && wire == wireBytes:
			b, err := w.bytes()
			if err != nil {
				return lm, err
			}
			if err := lm.Unmarshal(b); err != nil {
				return lm, fmt.Errorf("list meta: %w", err)
			}
		case field == 2 && wire == wireBytes:
			b, err := w.bytes()
			if err != nil {
				return lm, err
			}
			item.Reset()
			if trim != nil {
				// An item the trimmer cannot read goes to the generated
				// unmarshaller whole, which says what is wrong with it.
				if trimmed, err := trim(&t, b); err == nil {
					b = trimmed
					t.presize(item)
				}
			}
			if err := item.Unmarshal(b); err != nil {
				return lm, fmt.Errorf("list item: %w", err)
			}
			err = each(item)
			t.release()
			if err != nil {
				return lm, err
			}
		default:
			if err := w.skipField(wire); err != nil {
				return lm, err
			}
		}
	}
	w.end = outer
	return lm, nil
}

// Protobuf wire types.
const (
	wireVarint  = 0
	wireFixed64 = 1
	wireBytes   = 2
	wireFixed32 = 5
)

// wireReader reads protobuf fields from a stream, counting what it read so
// that a length-delimited field cannot run past the message holding it.
type wireReader struct {
	r    *bufio.Reader
	read int64
	end  int64 // where the current message ends; -1: at the end of the stream
	buf  []byte
}

// ReadByte counts the bytes binary.ReadUvarint takes.
func (w *wireReader) ReadByte() (byte, error) {
	if w.end >= 0 && w.read >= w.end {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := w.r.ReadByte()
	if err == nil {
		w.read++
	}
	return b, err
}

func (w *wireReader) varint() (uint64, error) {
	start := w.read
	v, err := binary.ReadUvarint(w)
	if errors.Is(err, io.EOF) && w.read > start {
		err = io.ErrUnexpectedEOF
	}
	return v, err
}

// tag reads a field's number and wire type; io.EOF at a clean end of stream.
func (w *wireReader) tag() (field uint64, wire int, err error) {
	v, err := w.varint()
	if err != nil {
		return 0, 0, err
	}
	if v>>3 == 0 {
		return 0, 0, fmt.Errorf("field number 0 at byte %d", w.read)
	}
	return v >> 3, int(v & 7), nil
}

// length reads a length prefix and checks it fits what is left of the message.
func (w *wireReader) length() (int64, error) {
	v, err := w.varint()
	if err != nil {
		return 0, unexpected(err)
	}
	if v > math.MaxInt32 || (w.end >= 0 && int64(v) > w.end-w.read) {
		return 0, fmt.Errorf("field of %d bytes at byte %d runs past its message", v, w.read)
	}
	return int64(v), nil
}

// bytes reads a length-delimited field into a buffer reused by the next call:
// the generated unmarshallers copy what they keep.
func (w *wireReader) bytes() ([]byte, error) {
	n, err := w.length()
	if err != nil {
		return nil, err
	}
	if n > maxListItemBytes {
		return nil, fmt.Errorf("field of %d bytes at byte %d: over %d, not an object", n, w.read, maxListItemBytes)
	}
	if int64(cap(w.buf)) < n {
		w.buf = make([]byte, n)
	}
	b := w.buf[:n]
	read, err := io.ReadFull(w.r, b)
	w.read += int64(read)
	if err != nil {
		return nil, unexpected(err)
	}
	return b, nil
}

func (w *wireReader) skip(n int) (int, error) {
	if w.end >= 0 && int64(n) > w.end-w.read {
		return 0, io.ErrUnexpectedEOF
	}
	got, err := w.r.Discard(n)
	w.read += int64(got)
	return got, unexpected(err)
}

// skipField passes over a field svcproxy does not read.
func (w *wireReader) skipField(wire int) error {
	switch wire {
	case wireVarint:
		_, err := w.varint()
		return unexpected(err)
	case wireFixed64:
		_, err := w.skip(8)
		return err
	case wireFixed32:
		_, err := w.skip(4)
		return err
	case wireBytes:
		n, err := w.length()
		if err != nil {
			return err
		}
		_, err = w.skip(int(n))
		return err
	}
	return fmt.Errorf("wire type %d at byte %d", wire, w.read)
}

// unexpected turns an end of stream inside a field into io.ErrUnexpectedEOF:
// the body was cut, which the retrying lister takes for a broken connection.
func unexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
