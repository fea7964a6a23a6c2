// admission-floor answers every AdmissionReview at once: allowed, with no change (-patch empty) or with the JSON
// patch given (the bytes netaware's webhook writes for the pod measured). It reads the review only for its uid.
package main

import (
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"time"
)

type review struct {
	Request struct {
		UID string `json:"uid"`
	} `json:"request"`
}

func main() {
	port := flag.Int("port", 9444, "port to listen on, on 127.0.0.1")
	cert := flag.String("tls-cert-file", "", "serving certificate (PEM)")
	key := flag.String("tls-private-key-file", "", "its private key (PEM)")
	patch := flag.String("patch", "", "the JSON patch every answer carries (empty: no change)")
	flag.Parse()
	if *patch != "" && !json.Valid([]byte(*patch)) {
		log.Fatalf("-patch is not JSON: %q", *patch)
	}
	encoded := base64.StdEncoding.EncodeToString([]byte(*patch))
	http.HandleFunc("/mutate-pods", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 3<<20))
		var asked review
		if err == nil {
			err = json.Unmarshal(body, &asked)
		}
		if err != nil || asked.Request.UID == "" {
			http.Error(w, "not an AdmissionReview", http.StatusBadRequest)
			return
		}
		answer := map[string]any{"uid": asked.Request.UID, "allowed": true}
		if *patch != "" {
			answer["patchType"] = "JSONPatch"
			answer["patch"] = encoded
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer,
		})
	})
	server := &http.Server{Addr: fmt.Sprintf("127.0.0.1:%d", *port), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second}
	log.Fatal(server.ListenAndServeTLS(*cert, *key))
}
