package promtest

import (
	"strings"
	"testing"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		want    []Sample
		wantErr string
	}{
		{
			name: "vector",
			body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"p"},"value":[1.5,"2.25"]}]}}`,
			want: []Sample{{Labels: map[string]string{"job": "p"}, Value: 2.25}},
		},
		{name: "empty vector", body: `{"status":"success","data":{"resultType":"vector","result":[]}}`, want: []Sample{}},
		{name: "NaN", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}`, want: nil, wantErr: ""},
		{name: "error status", body: `{"status":"error","error":"bad query"}`, wantErr: "bad query"},
		{name: "scalar", body: `{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}`, wantErr: "scalar"},
		{name: "not JSON", body: `<html>`, wantErr: "<html>"},
		{name: "number value", body: `{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,2]}]}}`, wantErr: "not a string"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decode("q", []byte(tt.body))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.name == "NaN" {
				if len(got) != 1 || got[0].Value == got[0].Value {
					t.Fatalf("got %v, want one NaN sample", got)
				}
				return
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i].Value != tt.want[i].Value || len(got[i].Labels) != len(tt.want[i].Labels) || got[i].Labels["job"] != tt.want[i].Labels["job"] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestConfig(t *testing.T) {
	got := Config("proxy", []string{"10.0.0.1:10249", "10.0.0.2:10249"})
	want := `  - targets: ["10.0.0.1:10249", "10.0.0.2:10249"]`
	if !strings.Contains(got, want) || !strings.Contains(got, "job_name: proxy\n") || !strings.Contains(got, "scrape_interval: 1s") {
		t.Fatalf("config:\n%s\nwant it to contain %q", got, want)
	}
}
