import pytest
from moto import mock_aws

from karpenter_lambda.adapters.store import Store


@pytest.fixture
def aws():
    with mock_aws():
        yield


@pytest.fixture
def store(aws):
    s = Store("test-cluster", table_name="state-test")
    s.ensure_table()
    return s


@pytest.fixture
def atomic_dynamodb(monkeypatch):
    """Make moto's DynamoDB writes atomic per call, as DynamoDB's are.

    moto checks a ConditionExpression and then stores the item without a lock, so two threads can both
    pass ``version = 1`` and both write (measured: a lost update in ~1 run of 3 with 8 threads).  Real
    DynamoDB evaluates the condition and writes atomically per item; this lock restores that guarantee
    in the fake so the concurrency test exercises OUR locking, not moto's race.
    """
    import threading

    from moto.dynamodb.models import DynamoDBBackend

    lock = threading.RLock()
    for name in ("put_item", "update_item", "delete_item", "transact_write_items"):
        original = getattr(DynamoDBBackend, name)

        def locked(self, *args, __original=original, **kwargs):
            with lock:
                return __original(self, *args, **kwargs)

        monkeypatch.setattr(DynamoDBBackend, name, locked)
