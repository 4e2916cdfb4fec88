"""A fake kube-apiserver served over real HTTP on 127.0.0.1, for tests (see `server`)."""

from tests.fakeapi.server import FakeAPI, RecordedRequest

__all__ = ['FakeAPI', 'RecordedRequest']
