def test_h(prefect_harness):
    from prefect import flow
    @flow
    def f(): return 1
    assert f() == 1
