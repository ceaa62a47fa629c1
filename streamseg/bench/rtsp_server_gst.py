"""A GStreamer RTSP server for the soak, benchmarks and tests (run by /usr/bin/python3).

It serves a live test pattern, H.264 (or VP9), on 127.0.0.1:PORT/PATH over
RTSP, optionally behind Basic authentication. Signals control it:

* SIGUSR1: stall. Every client's stream stops sending RTP (a ``valve``
  drops the buffers) while its RTSP/TCP session stays open, like a camera
  whose encoder hung.
* SIGUSR2: resume sending.
* SIGTERM / SIGINT: exit.

It prints ``READY`` on stdout once it listens, and ``STALLED`` / ``RESUMED``
after each signal. ``streamseg/bench/rtsp_server.py`` drives it.
"""

from __future__ import annotations

import argparse
import signal
import sys

import gi

gi.require_version("Gst", "1.0")
gi.require_version("GstRtspServer", "1.0")
from gi.repository import GLib, Gst, GstRtspServer  # noqa: E402

ENCODERS = {
    "h264": (
        "x264enc tune=zerolatency speed-preset=ultrafast key-int-max={gop} bitrate=300 "
        "! video/x-h264,profile=baseline ! rtph264pay name=pay0 pt=96 config-interval=1"
    ),
    "vp9": (
        "vp9enc deadline=1 cpu-used=8 keyframe-max-dist={gop} target-bitrate=300000 "
        "! rtpvp9pay name=pay0 pt=96"
    ),
}


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--path", default="/stream")
    p.add_argument("--width", type=int, default=160)
    p.add_argument("--height", type=int, default=120)
    p.add_argument("--fps", type=int, default=15)
    p.add_argument("--gop", type=int, default=15, help="key frame interval, frames")
    p.add_argument("--codec", choices=sorted(ENCODERS), default="h264")
    p.add_argument("--user", default=None)
    p.add_argument("--password", default=None)
    p.add_argument("--rtcp-interval", type=float, default=0.5, help="RTCP min interval, s")
    return p.parse_args(argv)


def launch_line(args: argparse.Namespace) -> str:
    caps = f"video/x-raw,width={args.width},height={args.height},framerate={args.fps}/1"
    return (
        f"( videotestsrc is-live=true pattern=ball ! {caps} ! videoconvert "
        f"! video/x-raw,format=I420 ! valve name=valve drop=false "
        f"! {ENCODERS[args.codec].format(gop=args.gop)} )"
    )


class Server:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.medias: list[GstRtspServer.RTSPMedia] = []
        self.stalled = False
        self.server = GstRtspServer.RTSPServer()
        self.server.set_address("127.0.0.1")
        self.server.set_service(str(args.port))
        factory = GstRtspServer.RTSPMediaFactory()
        factory.set_launch(launch_line(args))
        factory.set_shared(False)
        factory.connect("media-configure", self.on_media_configure)
        if args.user:
            self.add_auth(factory, args.user, args.password or "")
        self.server.get_mount_points().add_factory(args.path, factory)

    def add_auth(self, factory: GstRtspServer.RTSPMediaFactory, user: str, pw: str) -> None:
        auth = GstRtspServer.RTSPAuth()
        token = GstRtspServer.RTSPToken()
        token.set_string("media.factory.role", "user")
        auth.add_basic(GstRtspServer.RTSPAuth.make_basic(user, pw), token)
        self.server.set_auth(auth)
        perms, _ = Gst.Structure.from_string(
            "user, media.factory.access=(boolean)true, media.factory.construct=(boolean)true"
        )
        factory.add_role_from_structure(perms)

    def on_media_configure(self, _factory: object, media: GstRtspServer.RTSPMedia) -> None:
        self.medias.append(media)
        media.connect("prepared", self.on_prepared)
        media.connect("unprepared", lambda m: self.medias.remove(m) if m in self.medias else None)
        self.set_valve(media, self.stalled)

    def on_prepared(self, media: GstRtspServer.RTSPMedia) -> None:
        # Send RTCP sender reports often, so tests see camera time quickly.
        interval_ns = int(self.args.rtcp_interval * 1e9)
        for i in range(media.n_streams()):
            session = media.get_stream(i).get_rtpsession()
            if session is not None:
                session.set_property("rtcp-min-interval", interval_ns)

    @staticmethod
    def set_valve(media: GstRtspServer.RTSPMedia, drop: bool) -> None:
        valve = media.get_element().get_by_name("valve")
        if valve is not None:
            valve.set_property("drop", drop)

    def stall(self, drop: bool) -> bool:
        self.stalled = drop
        for media in list(self.medias):
            self.set_valve(media, drop)
        print("STALLED" if drop else "RESUMED", flush=True)
        return GLib.SOURCE_CONTINUE

    def run(self) -> None:
        loop = GLib.MainLoop()
        if self.server.attach(None) == 0:
            print(f"cannot listen on 127.0.0.1:{self.args.port}", file=sys.stderr, flush=True)
            sys.exit(3)
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGUSR1, self.stall, True)
        GLib.unix_signal_add(GLib.PRIORITY_HIGH, signal.SIGUSR2, self.stall, False)
        for sig in (signal.SIGTERM, signal.SIGINT):
            GLib.unix_signal_add(GLib.PRIORITY_HIGH, sig, lambda: loop.quit() or False)
        print("READY", flush=True)
        loop.run()


def main(argv: list[str]) -> None:
    Gst.init(None)
    Server(parse_args(argv)).run()


if __name__ == "__main__":
    main(sys.argv[1:])
