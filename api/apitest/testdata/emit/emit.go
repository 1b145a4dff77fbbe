package emit

import "net/http"

func problem(_ http.ResponseWriter, _ int, _ string) {}

func handlers(w http.ResponseWriter, status int, other bool) {
	problem(w, http.StatusUnprocessableEntity, "literal")
	problem(w, 500, "numeric")
	problem(w, http.StatusNotFound, "gone")
	code := "chosen"
	if other {
		code = w.Header().Get("x")
	}
	problem(w, http.StatusBadRequest, code)
	problem(w, status, "dynamic")
}
