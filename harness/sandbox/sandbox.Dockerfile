# The grader's sandbox image: Python + NumPy + CPU torch, a non-root user, and the worker (worker.py, wire.py)
# baked in read-only under /opt/grader. No grader, suite or reference code is ever copied in.
# Both are compiled here (checked-hash .pyc files, PEP 552): a container's worker runs /opt/grader/worker.pyc
# and imports wire from its __pycache__, so no start compiles them again (~18 ms of each container's start).
#
# Built by `grade sandbox build` (harness/sandbox/image.py), which assembles the context:
#   Dockerfile, worker.py, wire.py, wheels/ (empty unless --wheels DIR was given)
# With wheels present, everything installs offline from them (pip --no-index); otherwise numpy comes from the
# default index and torch from the PyTorch CPU index.
#
# The base image may lack pip (the offline base is Debian minbase with python3 + python3-venv), so a venv is
# made with `python3 -m venv`; Debian's ensurepip installs pip from /usr/share/python-wheels, offline.

ARG BASE_IMAGE=python:3.11-slim

# ---- builder: make /opt/venv with numpy and torch ---------------------------------------------------------
FROM ${BASE_IMAGE} AS builder
ARG TORCH_VERSION=2.13.0
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG NUMPY_SPEC=numpy
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
COPY wheels/ /wheels/
RUN set -eu; \
    python3 -m venv /opt/venv; \
    if ! /opt/venv/bin/python -m pip --version >/dev/null 2>&1; then \
        pipwhl="$(ls /wheels/pip-*.whl 2>/dev/null | head -n1)"; \
        test -n "$pipwhl" || { echo "no pip in the venv and no pip wheel in wheels/" >&2; exit 1; }; \
        /opt/venv/bin/python "$pipwhl/pip" install --no-index "$pipwhl"; \
    fi; \
    if ls /wheels/*.whl >/dev/null 2>&1; then \
        /opt/venv/bin/python -m pip install --no-index --find-links /wheels "$NUMPY_SPEC" "torch==${TORCH_VERSION}"; \
    else \
        /opt/venv/bin/python -m pip install "$NUMPY_SPEC" && \
        /opt/venv/bin/python -m pip install --index-url "$TORCH_INDEX_URL" "torch==${TORCH_VERSION}"; \
    fi; \
    /opt/venv/bin/python -m pip uninstall -y pip setuptools wheel >/dev/null 2>&1 || true; \
    find /opt/venv -type d -name tests -path '*/numpy/*' -prune -exec rm -rf {} +; \
    /opt/venv/bin/python -m compileall -q -j 0 /opt/venv >/dev/null || true; \
    chown -R root:root /opt/venv; chmod -R go-w /opt/venv; \
    /opt/venv/bin/python -c "import numpy, torch; print('numpy', numpy.__version__, 'torch', torch.__version__)"

# ---- final image (no RUN may touch /opt/venv here: that would copy it into a second layer) ----------
FROM ${BASE_IMAGE}
ARG GRADER_VERSION=unknown
ARG WORKER_SHA256=unknown
LABEL grader.sandbox="1" \
      grader.version="${GRADER_VERSION}" \
      grader.worker_sha256="${WORKER_SHA256}"
COPY --from=builder /opt/venv /opt/venv
COPY worker.py wire.py /opt/grader/
RUN set -eu; \
    /opt/venv/bin/python3 -I -c "import py_compile as c; m = c.PycInvalidationMode.CHECKED_HASH; \
        c.compile('/opt/grader/wire.py', invalidation_mode=m, doraise=True); \
        c.compile('/opt/grader/worker.py', cfile='/opt/grader/worker.pyc', invalidation_mode=m, doraise=True)"; \
    chown -R root:root /opt/grader; \
    find /opt/grader -type d -exec chmod 0555 {} +; find /opt/grader -type f -exec chmod 0444 {} +; \
    if command -v useradd >/dev/null 2>&1; then \
        groupadd --gid 10001 sandbox && useradd --uid 10001 --gid 10001 --home-dir /tmp --no-create-home \
            --shell /usr/sbin/nologin sandbox; \
    else \
        echo 'sandbox:x:10001:10001::/tmp:/usr/sbin/nologin' >> /etc/passwd; \
        echo 'sandbox:x:10001:' >> /etc/group; \
    fi; \
    rm -rf /root/.cache /tmp/* /var/tmp/*; \
    /opt/venv/bin/python3 -I -B -c "import numpy, torch"
ENV PATH=/opt/venv/bin:/usr/local/bin:/usr/bin:/bin \
    LANG=C.UTF-8 \
    PYTHONDONTWRITEBYTECODE=1
USER 10001:10001
WORKDIR /tmp
CMD ["python3", "-I", "-B", "/opt/grader/worker.py", "--help"]
