package manifests

import "fmt"

// Problem is one document (or List item) of a file that could not be used, and why.
type Problem struct {
	File string
	// Doc is the document's index in the file, from 0 ("---" separates YAML
	// documents; a JSON file may hold a stream of objects); -1 when the file as
	// a whole could not be read (FileProblem).
	Doc int
	// Item is the index in a List's items, from 0; -1 when the document is not a List.
	Item   int
	Reason string
}

func (p Problem) String() string {
	if p.Doc < 0 {
		return fmt.Sprintf("%s: %s", p.File, p.Reason)
	}
	if p.Item >= 0 {
		return fmt.Sprintf("%s: document %d: item %d: %s", p.File, p.Doc, p.Item, p.Reason)
	}
	return fmt.Sprintf("%s: document %d: %s", p.File, p.Doc, p.Reason)
}

// Key names an object a manifest declares.
type Key struct{ Kind, Namespace, Name string }

func (k Key) String() string { return k.Kind + " " + k.Namespace + "/" + k.Name }
