// Package manifesttest writes the small Service and EndpointSlice documents that the
// manifest reader's and the --manifests watcher's tests feed svcproxy.
package manifesttest

import "fmt"

// Service is a default/name Service with one TCP port "http" 80 on ip.
func Service(name, ip string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %s, namespace: default}
spec:
  clusterIP: %s
  ports: [{name: http, port: 80, protocol: TCP}]
`, name, ip)
}

// Slice is the EndpointSlice of Service svc with one ready endpoint per address.
func Slice(svc string, addrs ...string) string {
	s := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: %s-abc, namespace: default, labels: {kubernetes.io/service-name: %s}}
addressType: IPv4
ports: [{name: http, port: 80, protocol: TCP}]
endpoints:
`, svc, svc)
	for _, a := range addrs {
		s += fmt.Sprintf("- {addresses: [%s], conditions: {ready: true}}\n", a)
	}
	return s
}
