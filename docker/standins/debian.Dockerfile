# Stand-in for debian:bookworm-slim: the debootstrapped minbase (build.sh).
FROM local/bookworm:base
ENV LANG=C.UTF-8
CMD ["bash"]
