package manifests

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// invalid returns why kube-apiserver v1.37 would refuse obj's names, or "": the
// names svcproxy keys objects by and prints. A cluster's objects passed this check;
// a manifest's did not, and two invalid names can make one key (Service "a/b" in
// namespace "c" and Service "b" in namespace "c/a" both are c/a/b), or print a port
// name nft cannot read back (`pört"x`). As the apiserver checks them:
//   - a Service's name is a DNS-1123 label (RelaxedServiceNameValidation, GA and
//     locked on in v1.37; DNS-1035 before v1.34), an EndpointSlice's a DNS-1123
//     subdomain (ValidateEndpointSliceName);
//   - a namespace is a DNS-1123 label (ValidateNamespaceName); none at all is left
//     as manifests have always been read here (the object's namespace is "");
//   - labels are valid labels (kubernetes.io/service-name is the Service's name);
//   - port names, of a Service (validateServicePort) and of an EndpointSlice
//     (validateEndpointPorts), are DNS-1123 labels.
func invalid(obj metav1.Object, kind string, errs field.ErrorList) string {
	if len(errs) == 0 {
		return ""
	}
	return fmt.Sprintf("%s %q in namespace %q: %v", kind, obj.GetName(), obj.GetNamespace(), errs.ToAggregate())
}

func validateService(s *v1.Service) string {
	errs := validateMeta(&s.ObjectMeta, apivalidation.NameIsDNSLabel)
	for i, p := range s.Spec.Ports {
		errs = append(errs, portName(p.Name, field.NewPath("spec", "ports").Index(i).Child("name"))...)
	}
	return invalid(s, "Service", errs)
}

func validateEndpointSlice(s *discoveryv1.EndpointSlice) string {
	errs := validateMeta(&s.ObjectMeta, apivalidation.NameIsDNSSubdomain)
	for i, p := range s.Ports {
		if p.Name != nil {
			errs = append(errs, portName(*p.Name, field.NewPath("ports").Index(i).Child("name"))...)
		}
	}
	return invalid(s, "EndpointSlice", errs)
}

func validateMeta(m *metav1.ObjectMeta, name apivalidation.ValidateNameFunc) field.ErrorList {
	meta := field.NewPath("metadata")
	var errs field.ErrorList
	for _, msg := range name(m.Name, false) {
		errs = append(errs, field.Invalid(meta.Child("name"), m.Name, msg))
	}
	if m.Namespace != "" {
		for _, msg := range apivalidation.ValidateNamespaceName(m.Namespace, false) {
			errs = append(errs, field.Invalid(meta.Child("namespace"), m.Namespace, msg))
		}
	}
	return append(errs, metav1validation.ValidateLabels(m.Labels, meta.Child("labels"))...)
}

// portName checks a port's name; "" (a single unnamed port) is valid.
func portName(name string, path *field.Path) field.ErrorList {
	if name == "" {
		return nil
	}
	var errs field.ErrorList
	for _, msg := range validation.IsDNS1123Label(name) {
		errs = append(errs, field.Invalid(path, name, msg))
	}
	return errs
}
