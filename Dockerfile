# podsieve's image: a static binary on distroless, running as non-root.
# Build with `make docker-build IMG=registry.example/podsieve:TAG`.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY controllers/ controllers/
COPY internal/ internal/
COPY webhooks/ webhooks/
ARG VERSION=dev
ARG COMMIT=unknown
RUN CGO_ENABLED=0 go build -trimpath \
    -ldflags "-s -w -X github.com/podsieve/podsieve/internal/buildinfo.Version=${VERSION} -X github.com/podsieve/podsieve/internal/buildinfo.Commit=${COMMIT}" \
    -o /out/podsieve ./cmd/podsieve

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/podsieve /podsieve
USER 65532:65532
ENTRYPOINT ["/podsieve"]
