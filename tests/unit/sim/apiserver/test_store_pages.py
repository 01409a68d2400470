"""``Store.list_page``: the pages of a list, in its order, each a copy of its own objects only,
with the count of matching objects after it; what the HTTP ``limit``/``continue`` pages are cut from."""

from __future__ import annotations

from tests.builders import pod


def test_pages_cover_the_list_in_order_and_count_what_follows(store):
    for index in range(7):
        store.create("v1/pods", pod(f"p{index}", labels={"gang": "g" if index % 2 else "h"}), "default")
    whole, version = store.list("v1/pods", "default", label_selector="gang=g")
    pages, after, remaining = [], None, None
    while remaining != 0:
        items, page_version, remaining = store.list_page(
            "v1/pods", "default", label_selector="gang=g", after=after, limit=2
        )
        assert page_version == version
        pages.append([item["metadata"]["name"] for item in items])
        after = ("default", items[-1]["metadata"]["name"])
    assert pages == [["p1", "p3"], ["p5"]]
    assert [name for page in pages for name in page] == [item["metadata"]["name"] for item in whole]
    first, _, left = store.list_page("v1/pods", "default", limit=3)
    assert len(first) == 3 and left == 4
    first[0]["metadata"]["name"] = "changed"  # a copy: the store is untouched
    assert store.get("v1/pods", "p0", "default")["metadata"]["name"] == "p0"
    everything, _, none_left = store.list_page("v1/pods", "default")
    assert len(everything) == 7 and none_left == 0
